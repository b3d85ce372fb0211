#pragma once

// pgoutbox's logs: spdlog, JSON lines by default when stderr is not a terminal (SPEC.md
// "Operating it"), text for a terminal. Messages about one event carry its identity as fields:
// in JSON as members, in text as key=value after the message.

#include <spdlog/common.h>

#include <string>
#include <string_view>

#include "pgoutbox/lsn.h"

namespace pgoutbox::logging {

// Installs the default logger on stderr. format: auto, json or text; level: trace, debug, info,
// warn or error. Throws std::invalid_argument for other values.
void setup(std::string_view format, std::string_view level);

// The identity of one event, for log lines about it. Empty fields are left out.
struct EventFields {
  std::string_view event_id;
  std::string_view aggregate_id;  // the business key
  std::string_view topic;
  std::string_view trace_id;      // from a traceparent header, when there is one
  Lsn lsn;                        // commit LSN of its transaction; 0 is left out
};

// Logs `message` at `level` with the event's fields.
void event(spdlog::level::level_enum level, const EventFields& fields, std::string_view message);

}  // namespace pgoutbox::logging
