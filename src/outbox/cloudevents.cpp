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
  if (static_cast<int>(ymd.year()) > 9999) {
    // Beyond RFC 3339's four digits (Postgres allows years up to 294276): written as they are.
    return fmt::format("{}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", static_cast<int>(ymd.year()),
                       static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()), hms.hours().count(),
                       hms.minutes().count(), hms.seconds().count(), hms.subseconds().count());
  }
  // Written digit by digit: once per event, where fmt's format-string parsing showed in profiles.
  std::string out = "0000-00-00T00:00:00.000Z";
  const auto put = [&out](std::size_t offset, long long value, int width) {
    for (int i = width - 1; i >= 0; --i, value /= 10)
      out[offset + static_cast<std::size_t>(i)] = static_cast<char>('0' + value % 10);
  };
  put(0, static_cast<int>(ymd.year()), 4);
  put(5, static_cast<unsigned>(ymd.month()), 2);
  put(8, static_cast<unsigned>(ymd.day()), 2);
  put(11, hms.hours().count(), 2);
  put(14, hms.minutes().count(), 2);
  put(17, hms.seconds().count(), 2);
  put(20, hms.subseconds().count(), 3);
  return out;
}

std::string structured(const Attributes& a, std::string_view data, bool base64) {
  using debezium::append_json_string;
  std::string out;
  out.reserve(data.size() * (base64 ? 2 : 1) + a.id.size() + a.source.size() + a.type.size() + 160);
  out += "{\"specversion\":\"1.0\",\"id\":";
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
  out += '}';
  return out;
}

std::optional<std::string> apply(Record& rec, Attributes a, Mode mode, bool bytes, bool known_json) {
  if (!a.traceparent) {
    for (const auto& h : rec.headers) {
      if (h.name == "traceparent") a.traceparent = h.value;
    }
  }
  if (mode == Mode::binary) {
    // The attributes are moved into their headers, in one growth of the header list.
    rec.headers.reserve(rec.headers.size() + 8);
    rec.headers.push_back({"ce_specversion", "1.0"});
    rec.headers.push_back({"ce_id", std::move(a.id)});
    rec.headers.push_back({"ce_source", std::move(a.source)});
    rec.headers.push_back({"ce_type", std::move(a.type)});
    rec.headers.push_back({"ce_time", std::move(a.time)});
    if (a.subject) rec.headers.push_back({"ce_subject", std::move(*a.subject)});
    if (a.traceparent) rec.headers.push_back({"ce_traceparent", std::move(*a.traceparent)});
    if (!rec.tombstone) rec.headers.push_back({"content-type", std::move(a.datacontenttype)});
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
