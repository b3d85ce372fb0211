#pragma once

// CloudEvents 1.0 on Kafka (docs/migrating.md "Record formats"), the Kafka protocol binding's
// two content modes. Binary: the attributes are headers ce_specversion, ce_id, ce_source,
// ce_type, ce_time (and ce_subject, ce_traceparent), the data content type is header
// content-type, and the value is the payload as the string format writes it. Structured: the
// value is one application/cloudevents+json object holding the attributes and the payload as
// `data` (JSON) or `data_base64` (bytes). The Kafka key stays the aggregate id in both.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pgoutbox/outbox/record.h"

namespace pgoutbox::outbox::cloudevents {

struct Attributes {
  std::string id;
  std::string source;
  std::string type;
  std::string time;  // RFC 3339
  std::optional<std::string> subject;
  std::optional<std::string> traceparent;  // the distributed-tracing extension
  std::string datacontenttype;
};

// Unix milliseconds as RFC 3339 in UTC with milliseconds: 2026-12-07T16:12:30.123Z.
std::string rfc3339(std::int64_t unix_ms);

// The structured-mode value: `data` is JSON text inserted as it is, or, with `base64`, bytes
// written as data_base64.
std::string structured(const Attributes& attributes, std::string_view data, bool base64);

inline constexpr const char* kStructuredContentType = "application/cloudevents+json";

enum class Mode { binary, structured };

// Makes `rec` (its value the payload as the string format writes it, its headers final) the
// CloudEvent with these attributes; traceparent, when unset, comes from a header of that name.
// Binary: the ce_ headers and content-type are added. Structured: the value becomes the event,
// with the payload as `data` (as `data_base64` when `bytes`) and content-type
// application/cloudevents+json. A tombstone (a deletion marker for compaction) carries the ce_
// headers only in binary mode and nothing in structured mode. Returns the poison reason when the
// payload cannot be the event's JSON data: structured, not bytes, not `known_json`, and not JSON.
std::optional<std::string> apply(Record& rec, Attributes a, Mode mode, bool bytes, bool known_json);

}  // namespace pgoutbox::outbox::cloudevents
