#include "pgoutbox/diagnostics/finding.h"

#include <algorithm>

#include <fmt/format.h>

#include "pgoutbox/secrets.h"

namespace pgoutbox::diagnostics {

std::string format_line(const Finding& finding) {
  const char* tag = finding.severity == Severity::ok ? "ok  " : finding.severity == Severity::warning ? "WARN" : "FAIL";
  std::string line = fmt::format("{}  {}: {}", tag, finding.subject, finding.message);
  if (!finding.fix.empty()) line += fmt::format(" Fix: {}", finding.fix);
  // Findings quote libpq's and librdkafka's own text, which may hold a configured secret.
  return redact_secrets(line);
}

bool any_blocking(const std::vector<Finding>& findings) {
  return std::any_of(findings.begin(), findings.end(),
                     [](const Finding& f) { return f.severity == Severity::blocking; });
}

std::string summary(const std::vector<Finding>& findings) {
  const auto count = [&](Severity s) {
    return std::count_if(findings.begin(), findings.end(), [s](const Finding& f) { return f.severity == s; });
  };
  const auto warnings = count(Severity::warning);
  const auto blocking = count(Severity::blocking);
  return fmt::format("{} ok, {} warning{}, {} blocking", count(Severity::ok), warnings, warnings == 1 ? "" : "s",
                     blocking);
}

}  // namespace pgoutbox::diagnostics
