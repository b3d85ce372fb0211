#pragma once

// The topic template of an outbox table: literal Kafka topic characters and ${column}
// references, each replaced by that column's text when a record is routed.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pgoutbox/config/config.h"

namespace pgoutbox::config {

struct TopicPart {
  bool is_column = false;
  std::string text;  // literal text, or the column name as the catalog spells it
  bool operator==(const TopicPart&) const = default;
};

// Throws std::invalid_argument naming what is wrong: an unterminated or empty ${...}, a '$'
// that starts no reference, or a literal character Kafka does not allow in topic names.
std::vector<TopicPart> parse_topic_template(std::string_view text);

// Why `topic` is not a name Kafka accepts (Topic.java: 1 to 249 of [A-Za-z0-9._-], not "." or
// ".."), or an empty string when it is. Routing values come from rows, so every expanded topic
// is checked before it reaches the producer.
std::string topic_name_problem(std::string_view topic);

// Whether the template can expand to `topic`: literal parts as written, each ${column} one or
// more bytes.
bool template_fits(const std::vector<TopicPart>& parts, std::string_view topic);

// The topic when the template has no ${column}: known before any row arrives; nullopt otherwise
// (and for a template the loader refuses).
std::optional<std::string> static_topic(std::string_view topic_template);

// Every topic known before any row arrives, once each: the tables' and message outboxes' static
// templates, the dead-letter topic under poison.policy dead-letter, the checkpoint topic.
std::vector<std::string> known_topics(const Config& config);

// Topics pgoutbox writes for itself: the checkpoint topic and the dead-letter topic. No outbox
// row or message may route an event into either (docs/spec.md I11): a record there could pass
// for a checkpoint or for a dead-lettered event.
std::vector<std::string> reserved_topics(const Config& config);

// Kafka refuses to create a topic whose name differs from an existing one only by '.' against
// '_' (its metrics would collide): such twins are one topic here.
bool topic_names_collide(std::string_view a, std::string_view b);
// Checkpoint topics are named under this prefix (the default checkpoint.topic, or
// "pgoutbox.checkpoints.<name>" for a slot's own), and every relay reserves every name under it
// (and its twins), whatever its own checkpoint.topic: no relay's rows can reach another relay's
// checkpoints (docs/security.md "The checkpoint topic").
inline constexpr std::string_view kCheckpointTopicPrefix = "pgoutbox.checkpoints";
// Whether `topic` starts with kCheckpointTopicPrefix or a twin of it.
bool in_checkpoint_namespace(std::string_view topic);

// Whether `topic` is one of `reserved` (reserved_topics), a twin of one, or under
// kCheckpointTopicPrefix.
bool is_reserved_topic(const std::vector<std::string>& reserved, std::string_view topic);

// A topic_pattern that allows every topic name but the reserved ones and their twins.
std::string reserved_topic_exclusion(const Config& config);

// Why a template (with its optional topic_pattern allow-list) could route a row into a reserved
// topic, with the fix; empty when it cannot.
std::string reserved_topic_problem(const Config& config, std::string_view topic_template,
                                   const std::string& topic_pattern);

}  // namespace pgoutbox::config
