#pragma once

// One result of a preflight check (`pgoutbox check`): what was looked at, what was found and,
// when something is wrong, the fix. The seeds' troubleshooting path (wal_level → slots and
// senders → role → publication → columns → slot → Kafka) turned into lines an operator reads.

#include <string>
#include <vector>

namespace pgoutbox::diagnostics {

enum class Severity {
  ok,        // as it should be
  warning,   // pgoutbox can run, but look at it (an active slot, a dynamic topic, lag)
  blocking,  // `pgoutbox run` would fail or stall until this is fixed
};

struct Finding {
  Severity severity = Severity::ok;
  std::string subject;  // "wal_level", "table public.outbox", "slot pgoutbox", "kafka", ...
  std::string message;  // what was found
  std::string fix;      // what to do; empty when nothing needs doing

  static Finding ok(std::string subject, std::string message) {
    return {Severity::ok, std::move(subject), std::move(message), {}};
  }
  static Finding warning(std::string subject, std::string message, std::string fix) {
    return {Severity::warning, std::move(subject), std::move(message), std::move(fix)};
  }
  static Finding blocking(std::string subject, std::string message, std::string fix) {
    return {Severity::blocking, std::move(subject), std::move(message), std::move(fix)};
  }
};

// One line: "FAIL  wal_level: is replica, logical decoding needs logical. Fix: ...".
std::string format_line(const Finding& finding);

// True when any finding blocks.
bool any_blocking(const std::vector<Finding>& findings);

// "12 ok, 1 warning, 2 blocking".
std::string summary(const std::vector<Finding>& findings);

}  // namespace pgoutbox::diagnostics
