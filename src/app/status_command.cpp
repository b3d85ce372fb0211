#include <cstdio>

#include <fmt/format.h>

#include "load_config.h"
#include "operator_commands.h"
#include "pgoutbox/config/loader.h"
#include "pgoutbox/diagnostics/slot_status.h"
#include "run_command.h"

namespace pgoutbox::app {

int status(const std::string& config_path, bool json) {
  const auto loaded = load_config_or_report(config_path);
  if (!loaded) return kExitConfig;
  const config::Config& cfg = *loaded;
  std::optional<diagnostics::SlotStatus> slot;
  try {
    const auto conn = diagnostics::connect_ordinary(cfg, "status");
    slot = diagnostics::read_slot_status(conn, cfg.postgres.slot);
  } catch (const replication::PgError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return kExitPostgres;
  }
  if (!slot) {
    fmt::print(stderr,
               "replication slot \"{}\" does not exist (pgoutbox run creates it when postgres.create_slot is true)\n",
               cfg.postgres.slot);
    return kExitNoSlot;
  }
  if (json) {
    fmt::print("{}\n", diagnostics::to_json(*slot));
  } else {
    fmt::print("{}", diagnostics::to_text(*slot));
  }
  return kExitOk;
}

}  // namespace pgoutbox::app
