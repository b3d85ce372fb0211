#include "pgoutbox/outbox/cloudevents.h"

#include <chrono>

#include <fmt/format.h>
#include <simdjson.h>

#include "pgoutbox/outbox/debezium_json.h"
#include "row_text.h"

namespace pgoutbox::outbox::cloudevents {

std::string rfc3339(std::int64_t unix_ms) {
  const std::chrono::sys_time<std::chrono::milliseconds> at{std::chrono::milliseconds(unix_ms)};
  const auto days = std::chrono::floor<std::chrono::days>(at);
  const std::chrono::year_month_day ymd{days};
  const std::chrono::hh_mm_ss hms{at - days};
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", static_cast<int>(ymd.year()),
                     static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()), hms.hours().count(),
                     hms.minutes().count(), hms.seconds().count(), hms.subseconds().count());
}

std::string structured(const Attributes& a, std::string_view data, bool base64) {
  using debezium::append_json_string;
  std::string out = "{\"specversion\":\"1.0\",\"id\":";
  append_json_string(out, a.id);
  out += ",\"source\":";
  append_json_string(out, a.source);
  out += ",\"type\":";
  append_json_string(out, a.type);
  out += ",\"time\":";
  append_json_string(out, a.time);
  if (a.subject) {
    out += ",\"subject\":";
    append_json_string(out, *a.subject);
  }
  if (a.traceparent) {
    out += ",\"traceparent\":";
    append_json_string(out, *a.traceparent);
  }
  out += ",\"datacontenttype\":";
  append_json_string(out, a.datacontenttype);
  if (base64) {
    out += ",\"data_base64\":";
    append_json_string(out, debezium::base64(data));
  } else {
    out += ",\"data\":";
    out += data;
  }
  return out + "}";
}

std::optional<std::string> apply(Record& rec, Attributes a, Mode mode, bool bytes, bool known_json) {
  if (!a.traceparent) {
    for (const auto& h : rec.headers) {
      if (h.name == "traceparent") a.traceparent = h.value;
    }
  }
  if (mode == Mode::binary) {
    rec.headers.push_back({"ce_specversion", "1.0"});
    rec.headers.push_back({"ce_id", a.id});
    rec.headers.push_back({"ce_source", a.source});
    rec.headers.push_back({"ce_type", a.type});
    rec.headers.push_back({"ce_time", a.time});
    if (a.subject) rec.headers.push_back({"ce_subject", *a.subject});
    if (a.traceparent) rec.headers.push_back({"ce_traceparent", *a.traceparent});
    if (!rec.tombstone) rec.headers.push_back({"content-type", a.datacontenttype});
    return std::nullopt;
  }
  if (rec.tombstone) return std::nullopt;
  if (!bytes && !known_json) {
    thread_local simdjson::dom::parser parser;
    const ParserRelease release(parser);
    simdjson::dom::element ignored;
    if (const auto error = parser.parse(rec.value.data(), rec.value.size()).get(ignored); error != simdjson::SUCCESS) {
      return fmt::format("cloudevents-structured carries the payload as JSON data, and it is not JSON ({})",
                         simdjson::error_message(error));
    }
  }
  rec.value = structured(a, rec.value, bytes);
  rec.headers.push_back({"content-type", kStructuredContentType});
  return std::nullopt;
}

}  // namespace pgoutbox::outbox::cloudevents
