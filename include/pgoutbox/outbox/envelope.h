#pragma once

// A table-less outbox (docs/spec.md "The outbox pattern it serves", docs/outbox-layouts.md "Outbox without a
// table"): an application writes pg_logical_emit_message(true, prefix, envelope) in the
// transaction of its business change, and pgoutbox turns each message whose prefix is configured
// into one Kafka record. The envelope is a JSON object whose fields play the roles of an outbox
// table's columns, with Debezium's outbox column names by default:
//
//   {"id": "…", "aggregatetype": "order", "aggregateid": "42", "type": "OrderCreated",
//    "payload": {…} or "…", "headers": {"traceparent": "…"}}
//
// An envelope that is not a JSON object, or lacks an id, is poison (I8) like an unmappable row.
// So is one larger than the largest record the producer may send (ENVELOPE_TOO_LARGE), without
// being parsed: simdjson's parser takes about 13 bytes per byte of input, and a 300 MB message
// used to get the relay OOM-killed on every restart. The record would be about as large as the
// envelope (which adds only its other fields and JSON quoting), and librdkafka refuses a record
// above message.max.bytes anyway.

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "pgoutbox/config/config.h"
#include "pgoutbox/outbox/mapping.h"
#include "pgoutbox/outbox/record.h"

namespace pgoutbox::outbox {

// librdkafka's default message.max.bytes.
inline constexpr std::size_t kDefaultMaxMessageBytes = 1'000'000;

// The producer's message.max.bytes as kafka.properties sets it, else librdkafka's default.
std::size_t max_message_bytes(const std::map<std::string, std::string>& kafka_properties);

class MessageMapping {
 public:
  // The configuration is validated at load; a template or pattern that still fails throws
  // MappingError naming the entry.
  MessageMapping(std::vector<config::MessageConfig> messages, bool provenance_headers);

  // Index of the entry for this prefix, or nullopt: another application's message, ignored.
  std::optional<std::size_t> find(std::string_view prefix) const;

  // `max_bytes`: the producer's message.max.bytes (max_message_bytes below).
  std::variant<Record, Poison> build(std::size_t entry, std::string_view envelope, const TxnContext& txn,
                                     std::size_t max_bytes = kDefaultMaxMessageBytes) const;

  // The label a message outbox has where a table has schema.name (metrics, logs, dead letters).
  static std::string label(std::string_view prefix);

 private:
  struct TopicPart {
    std::string literal;
    std::optional<std::string> field;
  };
  struct Entry {
    config::MessageConfig config;
    std::string label;
    std::vector<TopicPart> topic;
    std::optional<std::regex> topic_pattern;
    std::vector<TopicPart> event_type;  // CloudEvents' type attribute, when format.event_type is set
  };
  using Fail = std::function<void(std::string, std::string)>;
  static std::vector<TopicPart> parse_template(const std::string& text);
  static void to_debezium_json(const Entry& entry, std::string_view envelope, Record& rec, const Fail& fail);
  // An envelope field's text as a topic template reads it (nullopt: missing, null, or no single text).
  using FieldText = std::function<std::optional<std::string>(std::string_view)>;
  // nullopt when a referenced field has no text; `missing` then names it.
  static std::optional<std::string> expand_template(const std::vector<TopicPart>& parts, const FieldText& field,
                                                    std::string* missing = nullptr);
  static void to_cloudevent(const Entry& entry, const FieldText& field, bool payload_is_json, Record& rec,
                            const Fail& fail);
  std::vector<Entry> entries_;
  bool provenance_;
};

}  // namespace pgoutbox::outbox
