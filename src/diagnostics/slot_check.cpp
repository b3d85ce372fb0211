// The slot (the seeds' "is the slot there, is someone holding it, how far behind is it"): read
// from pg_replication_slots over the ordinary connection.
#include <fmt/format.h>

#include "checks.h"
#include "pgoutbox/diagnostics/slot_status.h"
#include "pgoutbox/replication/server_features.h"

namespace pgoutbox::diagnostics::detail {
namespace {

// The downtime `check` expects a slot to survive when nothing more is known: a weekend nobody is
// on call for the relay (docs/operating.md, "Idle slots on PostgreSQL 18").
constexpr long long kPlannedDowntimeSeconds = 3LL * 24 * 3600;

}  // namespace

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
      ctx.findings.push_back(Finding::ok(subject,
                                         "does not exist yet; pgoutbox creates it at start (postgres.create_slot); "
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
  // conflicting (16+) is shown where the server has it; a true one was refused above.
  const std::string position =
      fmt::format("confirmed {}, lag {} bytes, retains {} bytes of WAL, wal_status {}{}{}", slot->confirmed_flush_lsn,
                  slot->lag_bytes, slot->retained_wal_bytes, slot->wal_status,
                  slot->state.conflicting ? ", conflicting = false" : "",
                  slot->state.inactive_since ? ", inactive since " + *slot->state.inactive_since : "");
  if (slot->state.wal_status == replication::WalStatus::unreserved) {
    ctx.findings.push_back(
        Finding::warning(subject, fmt::format("{}: it is about to be invalidated by max_slot_wal_keep_size.", position),
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
  check_slot_failover(ctx);
}

void check_slot_failover(CheckContext& ctx) {
  // 17 and later: is the slot synchronised to a physical standby (failover), or is this the
  // standby's copy (synced)? Without failover a promoted standby has no slot, and whatever was
  // committed after pgoutbox's last confirmation never reaches Kafka.
  if (!replication::features_of(ctx.conn.server_version()).slot_failover) return;
  const auto& pg = ctx.config.postgres;
  const std::string subject = "slot " + pg.slot;
  const auto slot = ctx.conn.slot(pg.slot);
  if (!slot || !slot->failover) return;
  if (*slot->failover) {
    ctx.findings.push_back(Finding::ok(
        subject, fmt::format("failover = true{}: a physical standby with sync_replication_slots = on keeps a copy",
                             slot->synced.value_or(false) ? ", synced (this server is the standby)" : "")));
    return;
  }
  const auto standbys =
      detail::first_row(ctx.conn, "SELECT count(*) FROM pg_catalog.pg_replication_slots WHERE slot_type = 'physical'");
  const std::string message = "failover = false: a standby promoted after a failover has no copy of this slot";
  if (standbys.empty() || standbys.at(0) == "0") {
    ctx.findings.push_back(Finding::ok(subject, message + " (no physical replication slot here)"));
    return;
  }
  ctx.findings.push_back(Finding::warning(
      subject,
      fmt::format("{}, and {} physical replication slot(s) serve standbys here: events committed since the "
                  "last confirmation would be lost on failover.",
                  message, standbys.at(0)),
      "set postgres.failover_slot: true and recreate the slot (pgoutbox slot drop -c FILE --yes while pgoutbox is "
      "stopped and caught up), then on the standby sync_replication_slots = on, hot_standby_feedback = on, and on "
      "the primary synchronized_standby_slots = '<standby's physical slot>'."));
}

void check_idle_slot_timeout(CheckContext& ctx) {
  // 18: a slot nobody streams from for longer than idle_replication_slot_timeout (seconds; 0, the
  // default, disables it) is invalidated at the next checkpoint (PostgreSQL docs, "Replication —
  // Sending Servers"), wal_status lost, invalidation_reason idle_timeout. A stopped pgoutbox
  // is exactly such a slot's client.
  if (!replication::features_of(ctx.conn.server_version()).idle_slot_timeout) return;
  const std::string subject = "idle_replication_slot_timeout";
  std::vector<std::string> row;
  std::vector<std::string> deadline;  // when the slot is idle now: after this a checkpoint invalidates it
  try {
    row = first_row(ctx.conn,
                    "SELECT setting::bigint, pg_catalog.current_setting('idle_replication_slot_timeout') FROM "
                    "pg_catalog.pg_settings WHERE name = 'idle_replication_slot_timeout'");
    if (row.empty()) return;
    deadline = first_row(ctx.conn, fmt::format("SELECT (inactive_since + make_interval(secs => {}))::text FROM "
                                               "pg_catalog.pg_replication_slots WHERE slot_name = {} AND NOT active "
                                               "AND inactive_since IS NOT NULL AND invalidation_reason IS NULL",
                                               row.at(0), ctx.conn.literal(ctx.config.postgres.slot)));
  } catch (const replication::PgError& e) {
    ctx.findings.push_back(Finding::warning(subject, fmt::format("cannot be read: {}.", e.what()),
                                            "make sure the role may read pg_settings and pg_replication_slots."));
    return;
  }
  const long long seconds = std::stoll(row.at(0));
  if (seconds == 0) {
    ctx.findings.push_back(Finding::ok(subject, "0: the server never invalidates an idle slot"));
    return;
  }
  std::string message = fmt::format(
      "is {}: a slot nobody streams from for longer (pgoutbox stopped, crashed, or not restarted) is invalidated at "
      "the next checkpoint, and every event committed since its last confirmation must then be re-published",
      row.at(1));
  if (!deadline.empty()) {
    message += fmt::format("; slot {} is idle now: the first checkpoint after {} invalidates it",
                           ctx.config.postgres.slot, deadline.at(0));
  }
  if (seconds >= kPlannedDowntimeSeconds) {
    ctx.findings.push_back(Finding::ok(subject, message + " (longer than the 3 days of downtime check plans for)"));
    return;
  }
  ctx.findings.push_back(Finding::warning(
      subject, message + ", and it is shorter than the 3 days of pgoutbox downtime check plans for.",
      "plan for the longest pgoutbox downtime: raise it above that (ALTER SYSTEM SET idle_replication_slot_timeout = "
      "'3d'; SELECT pg_reload_conf(); on a managed service, in its parameter group), or set it to 0."));
}

}  // namespace pgoutbox::diagnostics::detail
