#pragma once

// pgoutbox's logs: spdlog, JSON lines by default when stderr is not a terminal (docs/spec.md
// "Operating it"), text for a terminal. Messages about one event carry its identity as fields:
// in JSON as members, in text as key=value after the message.
//
// A JSON line:
//   {"timestamp":"2026-11-29T10:41:25.123Z","level":"error","message":"...","event_id":"...",
//    "aggregate_id":"...","topic":"...","lsn":"0/16B3748","trace_id":"4bf92f35..."}
// Every line is one valid JSON object whatever the message holds: quotes, newlines and control
// characters are escaped, and bytes that are not UTF-8 become U+FFFD.

#include <spdlog/common.h>
#include <spdlog/formatter.h>

#include <memory>
#include <string>
#include <string_view>

#include "pgoutbox/lsn.h"

namespace pgoutbox::logging {

// Installs the default logger on stderr. format: auto, json or text; level: trace, debug, info,
// warn or error. Throws std::invalid_argument for other values.
void setup(std::string_view format, std::string_view level);

// The identity of one event, for log lines about it. Empty fields are left out.
struct EventFields {
  std::string_view event_id = {};
  std::string_view aggregate_id = {};  // the business key
  std::string_view topic = {};
  std::string_view trace_id = {};  // from a traceparent header, when there is one
  Lsn lsn = {};                    // commit LSN of its transaction; 0 is left out
};

// Logs `message` at `level` with the event's fields.
void event(spdlog::level::level_enum level, const EventFields& fields, std::string_view message);

// The trace id of a W3C Trace Context `traceparent` value ("00-<32 hex>-<16 hex>-<2 hex>"), or
// empty when the value is not one (wrong shape, upper-case hex, version ff, all-zero ids).
std::string_view trace_id_from_traceparent(std::string_view traceparent);

enum class Format { json, text };

// auto → json unless `stderr_is_terminal`; throws std::invalid_argument for unknown names.
Format parse_format(std::string_view format, bool stderr_is_terminal);

// The formatter setup() installs, for tests and for loggers of one's own. Event fields reach it
// only through event() on the same thread (the loggers pgoutbox installs are synchronous).
std::unique_ptr<spdlog::formatter> make_formatter(Format format);

// spdlog's pattern formatter (the operator commands' lines, before and without setup()), with the
// configured secrets removed from each message as make_formatter's formatters remove them.
std::unique_ptr<spdlog::formatter> make_pattern_formatter(const std::string& pattern);

// `text` as the contents of a JSON string (no quotes around it), appended to `out`.
void append_json_escaped(std::string& out, std::string_view text);

}  // namespace pgoutbox::logging
