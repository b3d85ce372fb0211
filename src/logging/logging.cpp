#include "pgoutbox/logging/logging.h"

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <stdexcept>

#include "event_context.h"

namespace pgoutbox::logging {
namespace detail {
namespace {
thread_local const EventFields* current = nullptr;
}  // namespace

const EventFields* current_fields() { return current; }
FieldsScope::FieldsScope(const EventFields& fields) : previous_(current) { current = &fields; }
FieldsScope::~FieldsScope() { current = previous_; }

}  // namespace detail

Format parse_format(std::string_view format, bool stderr_is_terminal) {
  if (format == "json") return Format::json;
  if (format == "text") return Format::text;
  if (format == "auto") return stderr_is_terminal ? Format::text : Format::json;
  throw std::invalid_argument(fmt::format("log format {} is not auto, json or text", format));
}

void setup(std::string_view format, std::string_view level) {
  const Format chosen = parse_format(format, ::isatty(STDERR_FILENO) == 1);
  const auto parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off") {
    throw std::invalid_argument(fmt::format("log level {} is not trace, debug, info, warn or error", level));
  }
  // The default logger is the one every module and librdkafka's log callback write to. spdlog's
  // own writes to stdout; a daemon's logs go to stderr (stdout stays for a command's output), and
  // `auto` decides on stderr being a terminal, so the two must be the same stream. Synchronous.
  static const auto logger = [] {
    auto made = spdlog::stderr_color_mt("pgoutbox");
    spdlog::set_default_logger(made);
    return made;
  }();
  logger->set_formatter(make_formatter(chosen));
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::warn);
}

void event(spdlog::level::level_enum level, const EventFields& fields, std::string_view message) {
  const detail::FieldsScope scope(fields);
  spdlog::log(level, "{}", message);
}

}  // namespace pgoutbox::logging
