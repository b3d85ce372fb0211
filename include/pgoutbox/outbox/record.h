#pragma once

// One outbox row turned into a Kafka record: the user-facing contract of docs/spec.md's column-role
// table. Built by outbox::Mapping from a decoded Insert; consumed by the producer.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pgoutbox::outbox {

struct Header {
  std::string name;
  std::string value;
};

struct Record {
  std::string topic;
  std::optional<std::string> key;  // nullopt when the key column is NULL
  bool tombstone = false;          // a NULL payload under null_payload: tombstone
  std::string value;               // the payload bytes as stored (bytea decoded to raw bytes)
  std::string event_id;            // also header "id"
  std::vector<Header> headers;
  std::int64_t timestamp_ms = 0;
  // The configured table the row comes from (schema.name), for metrics and the dead-letter
  // record; never sent as such. Empty on a record rebuilt from a delivery report.
  std::string table;

  // Key + value bytes: what the record weighs in the in-flight byte cap (and what the
  // producer's delivery report gives back, so the two sides always agree).
  std::size_t weight() const;
};

// A row that cannot become a record (docs/spec.md I8): named by its event id when it has one. The
// record holds what could be built (original key, payload bytes and headers), so the poison
// policy can dead-letter it; its topic is empty when the routing value was the problem.
struct Poison {
  std::string event_id;
  std::string reason;
  // NULL_ID, NULL_ROUTING_VALUE, INVALID_TOPIC, NULL_PAYLOAD, INVALID_BYTEA, INVALID_JSON,
  // INVALID_HEADERS, TOO_MANY_HEADERS; for a message also INVALID_ENVELOPE, ENVELOPE_TOO_LARGE;
  // RESERVED_TOPIC (set by the relay)
  std::string code;
  Record record;
};

}  // namespace pgoutbox::outbox
