#include "pgoutbox/outbox/cloudevents.h"

#include <chrono>

#include <fmt/format.h>

#include "pgoutbox/outbox/debezium_json.h"

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

}  // namespace pgoutbox::outbox::cloudevents
