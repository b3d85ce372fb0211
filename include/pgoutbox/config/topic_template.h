#pragma once

// The topic template of an outbox table: literal Kafka topic characters and ${column}
// references, each replaced by that column's text when a record is routed.

#include <string>
#include <string_view>
#include <vector>

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

}  // namespace pgoutbox::config
