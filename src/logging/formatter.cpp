// The two line formats. JSON: one object per line, fixed members first (timestamp, level,
// message), then the event's fields. Text: the same facts for a person at a terminal, the
// level coloured by the sink, the event's fields as key=value.
#include <fmt/format.h>
#include <spdlog/details/log_msg.h>
#include <spdlog/pattern_formatter.h>

#include <array>
#include <chrono>
#include <ctime>

#include "event_context.h"
#include "pgoutbox/logging/logging.h"
#include "pgoutbox/secrets.h"
#include "utf8.h"

namespace pgoutbox::logging {
namespace {

// Indexed by spdlog's level (trace = 0 … off = 6); spdlog's own names say "warning".
constexpr std::array<std::string_view, spdlog::level::n_levels> kLevelNames = {"trace", "debug",    "info", "warn",
                                                                               "error", "critical", "off"};

std::string_view level_name(spdlog::level::level_enum level) {
  const auto index = static_cast<std::size_t>(level);
  return index < kLevelNames.size() ? kLevelNames[index] : "off";
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

// Row values reach log lines (event ids, keys, topics, poison reasons) and rows are written by
// whoever the application lets write them (SECURITY.md "Row values"): each field and each
// message is cut to a bound, so one row cannot make a line of megabytes.
constexpr std::size_t kMaxFieldBytes = 256;
constexpr std::size_t kMaxMessageBytes = 4096;

// `text` cut to at most `max` bytes at a UTF-8 character boundary, with a note of what was cut.
std::string bounded(std::string_view text, std::size_t max) {
  if (text.size() <= max) return std::string(text);
  std::size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0U) == 0x80U) --cut;
  return fmt::format("{}...[{} bytes]", text.substr(0, cut), text.size());
}

// The message, without the configured secrets (before it is cut, so no secret is cut in two) and
// bounded. Whatever a module logs, libpq's and librdkafka's words among it, a secret never
// reaches the log (SECURITY.md "Secrets and transport").
std::string message_of(const spdlog::details::log_msg& msg) {
  return bounded(redact_secrets(std::string_view(msg.payload.data(), msg.payload.size())), kMaxMessageBytes);
}

// Calls add(name, value) for each field of the current event that is set, in a fixed order.
template <class Add>
void for_each_field(Add&& add) {
  const auto* current = detail::current_fields();
  if (current == nullptr) return;
  const EventFields& fields = *current;
  if (!fields.event_id.empty()) add("event_id", bounded(fields.event_id, kMaxFieldBytes));
  if (!fields.aggregate_id.empty()) add("aggregate_id", bounded(fields.aggregate_id, kMaxFieldBytes));
  if (!fields.topic.empty()) add("topic", bounded(fields.topic, kMaxFieldBytes));
  if (!fields.lsn.is_zero()) add("lsn", fields.lsn.to_string());
  if (!fields.trace_id.empty()) add("trace_id", bounded(fields.trace_id, kMaxFieldBytes));
}

// A text line is one line whatever the message holds: C0 controls and DEL become escapes (\n,
// \r, \t, \x1b, ...), and so do the C1 controls (U+0080..U+009F, e.g. CSI), which a terminal
// would otherwise obey. A newline in a row value can then neither forge a line nor steer the
// terminal. A byte of 0x80 or more outside a well-formed UTF-8 sequence becomes \xNN too: a
// terminal in an 8-bit mode reads a raw 0x9B as CSI, and rows need not be UTF-8 (SQL_ASCII).
void append_text_escaped(std::string& out, std::string_view text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const std::size_t n = detail::utf8_sequence_length(text, i);
      if (n == 0) {
        out += fmt::format("\\x{:02x}", c);
        continue;
      }
      const auto second = static_cast<unsigned char>(text[i + 1]);
      if (c == 0xC2 && second <= 0x9F) {
        out += fmt::format("\\u{:04x}", second);
      } else {
        out.append(text.substr(i, n));
      }
      i += n - 1;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
}

// `text` as a JSON string, quotes included.
void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  append_json_escaped(out, text);
  out += '"';
}

void append_to(spdlog::memory_buf_t& dest, const std::string& line) {
  dest.append(line.data(), line.data() + line.size());
}

class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string line;
    line.reserve(128 + msg.payload.size());
    line += R"({"timestamp":")";
    append_timestamp(line, msg.time);
    line += R"(","level":")";
    line += level_name(msg.level);
    line += R"(","message":)";
    append_json_string(line, message_of(msg));
    for_each_field([&line](std::string_view name, std::string_view value) {
      line += ',';
      append_json_string(line, name);
      line += ':';
      append_json_string(line, value);
    });
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
    // Any byte outside printable ASCII: a C1 control, or a raw byte of a SQL_ASCII database that a
    // terminal would take for one, is written escaped.
    if (u <= 0x20 || u >= 0x7F || c == '"' || c == '=' || c == '\\') return true;
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
    append_text_escaped(line, message_of(msg));
    for_each_field([&line](std::string_view name, std::string_view value) {
      line += ' ';
      line += name;
      line += '=';
      if (needs_quotes(value)) {
        append_json_string(line, value);
      } else {
        line += value;
      }
    });
    line += '\n';
    append_to(dest, line);
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<TextFormatter>(); }
};

class RedactingPatternFormatter final : public spdlog::formatter {
 public:
  explicit RedactingPatternFormatter(const std::string& pattern)
      : pattern_(pattern), inner_(std::make_unique<spdlog::pattern_formatter>(pattern)) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string text = redact_secrets(std::string_view(msg.payload.data(), msg.payload.size()));
    spdlog::details::log_msg redacted = msg;
    redacted.payload = text;
    inner_->format(redacted, dest);
    msg.color_range_start = redacted.color_range_start;
    msg.color_range_end = redacted.color_range_end;
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<RedactingPatternFormatter>(pattern_);
  }

 private:
  std::string pattern_;
  std::unique_ptr<spdlog::pattern_formatter> inner_;
};

}  // namespace

std::unique_ptr<spdlog::formatter> make_pattern_formatter(const std::string& pattern) {
  return std::make_unique<RedactingPatternFormatter>(pattern);
}

std::unique_ptr<spdlog::formatter> make_formatter(Format format) {
  if (format == Format::json) return std::make_unique<JsonFormatter>();
  return std::make_unique<TextFormatter>();
}

}  // namespace pgoutbox::logging
