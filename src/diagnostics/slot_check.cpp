// The slot (the seeds' "is the slot there, is someone holding it, how far behind is it"): read
// from pg_replication_slots over the ordinary connection.
#include <fmt/format.h>

#include "checks.h"
#include "pgoutbox/diagnostics/slot_status.h"

namespace pgoutbox::diagnostics::detail {

void check_slot(CheckContext& ctx) {
  const auto& pg = ctx.config.postgres;
  const std::string subject = "slot " + pg.slot;
  std::optional<SlotStatus> slot;
  try {
    slot = read_slot_status(ctx.conn, pg.slot);
  } catch (const replication::PgError& e) {
    ctx.findings.push_back(Finding::blocking(subject, fmt::format("cannot be read: {}.", e.what()),
                                             "check that pg_catalog.pg_replication_slots is readable."));
    return;
  }
  if (!slot) {
    if (pg.create_slot) {
      ctx.findings.push_back(Finding::ok(subject, "does not exist yet; pgoutbox creates it at start (postgres.create_slot); "
                                                  "rows committed before that are not relayed"));
    } else {
      ctx.findings.push_back(Finding::blocking(
          subject, "does not exist and postgres.create_slot is false.",
          fmt::format("SELECT pg_create_logical_replication_slot({}, 'pgoutput'); or set postgres.create_slot: true.",
                      ctx.conn.literal(pg.slot))));
    }
    return;
  }
  if (const auto problem = replication::validate_slot(slot->state, ctx.database)) {
    ctx.findings.push_back(Finding::blocking(subject, problem->message + ".", problem->fix + "."));
    return;
  }
  const std::string position = fmt::format("confirmed {}, lag {} bytes, retains {} bytes of WAL, wal_status {}",
                                           slot->confirmed_flush_lsn, slot->lag_bytes, slot->retained_wal_bytes,
                                           slot->wal_status);
  if (slot->wal_status == "unreserved") {
    ctx.findings.push_back(Finding::warning(
        subject, fmt::format("{}: it is about to be invalidated by max_slot_wal_keep_size.", position),
        "start pgoutbox (or find why it does not confirm) now, or raise max_slot_wal_keep_size."));
  } else {
    ctx.findings.push_back(Finding::ok(subject, position));
  }
  if (slot->active) {
    ctx.findings.push_back(Finding::warning(
        subject,
        fmt::format("is active (pid {}): another pgoutbox or client streams from it; a new pgoutbox waits as a standby "
                    "until it stops.",
                    slot->active_pid ? std::to_string(*slot->active_pid) : std::string("?")),
        "nothing if that is your running pgoutbox; otherwise find the client in pg_stat_replication and stop it."));
  }
}

}  // namespace pgoutbox::diagnostics::detail
