#include <cstdio>

#include <fmt/format.h>

#include "operator_commands.h"
#include "pgoutbox/config/loader.h"
#include "pgoutbox/diagnostics/preflight.h"
#include "pgoutbox/relay/outcome.h"
#include "run_command.h"

namespace pgoutbox::app {

int check(const std::string& config_path, std::chrono::milliseconds kafka_timeout) {
  config::Config cfg;
  try {
    cfg = config::load(config_path, config::Environment::from_process());
  } catch (const config::ConfigError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return kExitConfig;
  }
  fmt::print("configuration {}: valid\n", config_path);
  auto findings = diagnostics::check_postgres(cfg);
  auto kafka = diagnostics::check_kafka(cfg, kafka_timeout);
  findings.insert(findings.end(), kafka.begin(), kafka.end());
  for (const auto& finding : findings) fmt::print("{}\n", diagnostics::format_line(finding));
  const bool blocked = diagnostics::any_blocking(findings);
  fmt::print("{}: {}\n", blocked ? "blocked" : "ready", diagnostics::summary(findings));
  // A server too old gets run's own code for it, so scripts tell "upgrade" from "fix a setting".
  if (diagnostics::unsupported_server(findings)) return relay::exit_code(relay::Fatal::unsupported_server);
  if (blocked) return kExitBlocked;
  return kExitOk;
}

}  // namespace pgoutbox::app
