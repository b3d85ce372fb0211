#include <cstdio>

#include <fmt/format.h>

#include "load_config.h"
#include "operator_commands.h"
#include "pgoutbox/config/loader.h"
#include "pgoutbox/diagnostics/slot_status.h"
#include "run_command.h"

namespace pgoutbox::app {
namespace {

std::string pid_text(const std::optional<int>& pid) { return pid ? std::to_string(*pid) : std::string("unknown"); }

}  // namespace

// Dropping a slot discards its position: the server frees the WAL it kept, and outbox rows
// committed after confirmed_flush_lsn that Kafka does not hold yet are never relayed. A new slot
// starts at the WAL position of its creation. So: refuse while someone streams from it, and
// say what would be lost unless the operator confirms.
int slot_drop(const std::string& config_path, bool confirmed) {
  const auto loaded = load_config_or_report(config_path);
  if (!loaded) return kExitConfig;
  const config::Config& cfg = *loaded;
  const auto& name = cfg.postgres.slot;
  try {
    const auto conn = diagnostics::connect_ordinary(cfg, "slot-drop");
    const auto slot = diagnostics::read_slot_status(conn, name);
    if (!slot) {
      fmt::print(stderr, "replication slot \"{}\" does not exist: nothing to drop\n", name);
      return kExitNoSlot;
    }
    if (!confirmed) {
      fmt::print("{}", diagnostics::to_text(*slot));
      fmt::print(stderr,
                 "refusing to drop replication slot \"{}\" without --yes: it is confirmed up to {} and {} bytes of WAL "
                 "(of every table, not events) were written since; outbox rows committed after {} that Kafka does not "
                 "hold yet would never be "
                 "relayed{}\n",
                 name, slot->confirmed_flush_lsn, slot->lag_bytes, slot->confirmed_flush_lsn,
                 slot->active ? fmt::format(" (and pid {} streams from it now: stop that pgoutbox first)",
                                            pid_text(slot->active_pid))
                              : "");
      return kExitBlocked;
    }
    const auto outcome = diagnostics::drop_slot(conn, name);
    switch (outcome.result) {
      case diagnostics::DropResult::dropped:
        // lag_bytes counts WAL written since the confirmed position by anything (other tables,
        // vacuum, checkpoints), not outbox events: after a clean stop it is rarely 0 and is no loss.
        fmt::print(
            "dropped replication slot \"{}\" (confirmed up to {}; {} bytes of WAL were written since, by any "
            "table: WAL, not events; only outbox rows committed after {}, if any, were not relayed)\n",
            name, slot->confirmed_flush_lsn, slot->lag_bytes, slot->confirmed_flush_lsn);
        for (const auto& marker : outcome.markers) fmt::print("dropped its backfill marker slot \"{}\"\n", marker);
        return kExitOk;
      case diagnostics::DropResult::missing:
        fmt::print(stderr, "replication slot \"{}\" does not exist: nothing to drop\n", name);
        return kExitNoSlot;
      case diagnostics::DropResult::active:
        fmt::print(stderr,
                   "refusing to drop replication slot \"{}\": pid {} streams from it; stop that pgoutbox (SIGTERM) and "
                   "run this again\n",
                   name, pid_text(outcome.active_pid));
        return kExitSlotActive;
    }
  } catch (const replication::PgError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return kExitPostgres;
  }
  return kExitPostgres;
}

}  // namespace pgoutbox::app
