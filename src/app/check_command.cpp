#include <cstdio>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "load_config.h"
#include "operator_commands.h"
#include "pgoutbox/config/loader.h"
#include "pgoutbox/diagnostics/preflight.h"
#include "pgoutbox/metrics/http_server.h"
#include "pgoutbox/relay/outcome.h"
#include "run_command.h"

namespace pgoutbox::app {
namespace {

// `run` listens on metrics_address before anything else and exits 2 when it cannot: try the
// same bind, and let it go at once.
std::optional<diagnostics::Finding> check_metrics_address(const config::Config& cfg) {
  if (cfg.metrics_address.empty()) return std::nullopt;
  try {
    const metrics::HttpServer probe(cfg.metrics_address, {});
    return diagnostics::Finding::ok("metrics_address", "pgoutbox can listen on " + cfg.metrics_address);
  } catch (const std::runtime_error& e) {
    return diagnostics::Finding::blocking(
        "metrics_address", fmt::format("{} ({}).", e.what(), cfg.metrics_address_origin),
        "stop what listens there (ss -ltnp), or choose another port in metrics_address (or leave it empty: no "
        "metrics).");
  }
}

}  // namespace

int check(const std::string& config_path, std::chrono::milliseconds kafka_timeout) {
  const auto loaded = load_config_or_report(config_path);
  if (!loaded) return kExitConfig;
  const config::Config& cfg = *loaded;
  fmt::print("configuration {}: valid\n", config_path);
  auto findings = diagnostics::check_postgres(cfg);
  if (auto metrics = check_metrics_address(cfg)) findings.push_back(std::move(*metrics));
  auto kafka = diagnostics::check_kafka(cfg, kafka_timeout);
  findings.insert(findings.end(), kafka.begin(), kafka.end());
  const auto transport = diagnostics::check_transport_security(cfg);
  findings.insert(findings.end(), transport.begin(), transport.end());
  for (const auto& finding : findings) fmt::print("{}\n", diagnostics::format_line(finding));
  const bool blocked = diagnostics::any_blocking(findings);
  fmt::print("{}: {}\n", blocked ? "blocked" : "ready", diagnostics::summary(findings));
  // A server too old gets run's own code for it, so scripts tell "upgrade" from "fix a setting".
  if (diagnostics::unsupported_server(findings)) return relay::exit_code(relay::Fatal::server_version);
  if (blocked) return kExitBlocked;
  return kExitOk;
}

}  // namespace pgoutbox::app
