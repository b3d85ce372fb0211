// The two line formats. JSON: one object per line, fixed members first (timestamp, level,
// message), then the event's fields. Text: the same facts for a person at a terminal, the
// level coloured by the sink, the event's fields as key=value.
#include <fmt/format.h>
#include <spdlog/details/log_msg.h>

#include <chrono>
#include <ctime>

#include "event_context.h"
#include "pgoutbox/logging/logging.h"

namespace pgoutbox::logging {
namespace {

std::string_view level_name(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace: return "trace";
    case spdlog::level::debug: return "debug";
    case spdlog::level::info: return "info";
    case spdlog::level::warn: return "warn";
    case spdlog::level::err: return "error";
    case spdlog::level::critical: return "critical";
    case spdlog::level::off:
    case spdlog::level::n_levels: break;
  }
  return "off";
}

// ISO-8601 in UTC with milliseconds: 2026-11-29T10:41:25.123Z.
void append_timestamp(std::string& out, spdlog::log_clock::time_point time) {
  const auto since_epoch = time.time_since_epoch();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - seconds).count();
  const std::time_t t = seconds.count();
  std::tm utc{};
  gmtime_r(&t, &utc);
  fmt::format_to(std::back_inserter(out), "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", utc.tm_year + 1900,
                 utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, millis);
}

// Calls add(name, value) for each field that is set, in a fixed order.
template <class Add>
void for_each_field(const EventFields& fields, Add&& add) {
  if (!fields.event_id.empty()) add("event_id", fields.event_id);
  if (!fields.aggregate_id.empty()) add("aggregate_id", fields.aggregate_id);
  if (!fields.topic.empty()) add("topic", fields.topic);
  if (!fields.lsn.is_zero()) add("lsn", fields.lsn.to_string());
  if (!fields.trace_id.empty()) add("trace_id", fields.trace_id);
}

void append_to(spdlog::memory_buf_t& dest, const std::string& line) { dest.append(line.data(), line.data() + line.size()); }

class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string line;
    line.reserve(128 + msg.payload.size());
    line += R"({"timestamp":")";
    append_timestamp(line, msg.time);
    line += R"(","level":")";
    line += level_name(msg.level);
    line += R"(","message":")";
    append_json_escaped(line, std::string_view(msg.payload.data(), msg.payload.size()));
    line += '"';
    if (const auto* fields = detail::current_fields()) {
      for_each_field(*fields, [&line](std::string_view name, std::string_view value) {
        line += ",\"";
        line += name;
        line += "\":\"";
        append_json_escaped(line, value);
        line += '"';
      });
    }
    line += "}\n";
    append_to(dest, line);
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonFormatter>(); }
};

// A value that a reader could not split on spaces is written as a JSON string.
bool needs_quotes(std::string_view value) {
  if (value.empty()) return true;
  for (const char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7F || c == '"' || c == '=' || c == '\\') return true;
  }
  return false;
}

class TextFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string line;
    line.reserve(64 + msg.payload.size());
    append_timestamp(line, msg.time);
    line += ' ';
    msg.color_range_start = line.size();
    line += level_name(msg.level);
    msg.color_range_end = line.size();
    line += ' ';
    line.append(msg.payload.data(), msg.payload.size());
    if (const auto* fields = detail::current_fields()) {
      for_each_field(*fields, [&line](std::string_view name, std::string_view value) {
        line += ' ';
        line += name;
        line += '=';
        if (!needs_quotes(value)) {
          line += value;
          return;
        }
        line += '"';
        append_json_escaped(line, value);
        line += '"';
      });
    }
    line += '\n';
    append_to(dest, line);
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<TextFormatter>(); }
};

}  // namespace

std::unique_ptr<spdlog::formatter> make_formatter(Format format) {
  if (format == Format::json) return std::make_unique<JsonFormatter>();
  return std::make_unique<TextFormatter>();
}

}  // namespace pgoutbox::logging
