// `pgoutbox config validate FILE`: the configuration through the same loader as `run` (the
// PGOUTBOX_* environment applied, every secret file read), and nothing connected. Deployment
// tooling (deploy/helm/validate) runs it on each configuration a Helm chart renders.
#include <cstdio>

#include <fmt/format.h>

#include "load_config.h"
#include "operator_commands.h"
#include "run_command.h"

namespace pgoutbox::app {

int config_validate(const std::string& config_path) {
  const auto config = load_config_or_report(config_path);
  if (!config) return kExitConfig;
  fmt::print("{}: valid: slot {}, publication {}, {} table(s), {} message prefix(es)\n", config_path,
             config->postgres.slot, config->postgres.publication, config->tables.size(), config->messages.size());
  return kExitOk;
}

}  // namespace pgoutbox::app
