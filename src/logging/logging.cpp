#include "pgoutbox/logging/logging.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <stdexcept>

namespace pgoutbox::logging {

void setup(std::string_view format, std::string_view level) {
  if (format != "auto" && format != "json" && format != "text") {
    throw std::invalid_argument(fmt::format("log format {} is not auto, json or text", format));
  }
  const auto parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off") {
    throw std::invalid_argument(fmt::format("log level {} is not trace, debug, info, warn or error", level));
  }
  spdlog::set_level(parsed);
}

void event(spdlog::level::level_enum level, const EventFields& fields, std::string_view message) {
  std::string line(message);
  const auto add = [&line](std::string_view name, std::string_view value) {
    if (!value.empty()) line += fmt::format(" {}={}", name, value);
  };
  add("event_id", fields.event_id);
  add("aggregate_id", fields.aggregate_id);
  add("topic", fields.topic);
  add("trace_id", fields.trace_id);
  if (!fields.lsn.is_zero()) add("lsn", fields.lsn.to_string());
  spdlog::log(level, "{}", line);
}

}  // namespace pgoutbox::logging
