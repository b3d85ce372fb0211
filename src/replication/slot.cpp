#include "pgoutbox/replication/slot.h"

#include <libpq-fe.h>

#include <fmt/format.h>

namespace pgoutbox::replication {
namespace {

std::string text_at(const PGresult* res, int row, int col) {
  return PQgetisnull(res, row, col) != 0 ? std::string() : std::string(PQgetvalue(res, row, col));
}

std::optional<std::int64_t> int_at(const PGresult* res, int row, int col) {
  if (PQgetisnull(res, row, col) != 0) return std::nullopt;
  return std::stoll(PQgetvalue(res, row, col));
}

Lsn lsn_at(const PGresult* res, int row, int col) { return Lsn::parse(text_at(res, row, col)).value_or(Lsn{}); }

// Why an invalidated slot was invalidated, and what keeps the next one from it. 17 and later say
// (pg_replication_slots.invalidation_reason; every reason also sets wal_status lost, so the
// reason is read first); on 16, conflicting means a recovery conflict on a standby (its
// wal_status is lost as well), and otherwise a lost wal_status means max_slot_wal_keep_size.
struct Invalidation {
  std::string shown;    // the column that says so: "invalidation_reason idle_timeout"
  std::string why;      // what happened
  std::string prevent;  // appended to the fix, "; …", or empty
};

Invalidation invalidation_of(const SlotState& slot) {
  constexpr const char* kStandbyConflict =
      "; on a standby, hot_standby_feedback = on and a physical slot (primary_slot_name) prevent the conflict";
  if (!slot.invalidation_reason) {
    // 16 sets wal_status lost for a recovery conflict too: conflicting is what tells them apart.
    if (slot.conflicting == true) {
      return {"conflicting = true",
              "rows it needed were vacuumed on the primary, or the primary's wal_level fell below logical (a recovery "
              "conflict on this standby)",
              kStandbyConflict};
    }
    return {"wal_status lost", "the WAL it needed was removed (max_slot_wal_keep_size)", ""};
  }
  const std::string& reason = *slot.invalidation_reason;
  const std::string shown = "invalidation_reason " + reason;
  if (reason == "idle_timeout") {
    return {shown, "it stayed inactive longer than idle_replication_slot_timeout (PostgreSQL 18)",
            "; then raise idle_replication_slot_timeout above the longest pgoutbox downtime you plan for, or set it to "
            "0 (ALTER SYSTEM SET idle_replication_slot_timeout = 0; SELECT pg_reload_conf(); on a managed service, in "
            "its parameter group)"};
  }
  if (reason == "wal_removed") return {shown, "the WAL it needed was removed (max_slot_wal_keep_size)", ""};
  if (reason == "rows_removed") {
    return {shown, "rows it needed were vacuumed on the primary (a recovery conflict on this standby)",
            kStandbyConflict};
  }
  if (reason == "wal_level_insufficient") return {shown, "wal_level on the primary fell below logical", ""};
  return {shown, "it can no longer decode", ""};
}

}  // namespace

WalStatus parse_wal_status(std::string_view text) {
  if (text == "reserved") return WalStatus::reserved;
  if (text == "extended") return WalStatus::extended;
  if (text == "unreserved") return WalStatus::unreserved;
  if (text == "lost") return WalStatus::lost;
  return WalStatus::unknown;
}

std::string_view to_string(WalStatus status) {
  switch (status) {
    case WalStatus::reserved:
      return "reserved";
    case WalStatus::extended:
      return "extended";
    case WalStatus::unreserved:
      return "unreserved";
    case WalStatus::lost:
      return "lost";
    case WalStatus::unknown:
      break;
  }
  return "";
}

std::string slot_query(std::string_view slot_literal, int server_version) {
  // On a standby the server's position is the replayed one (pg_current_wal_lsn() would fail).
  // Differences are clamped at 0: an idle slot's confirmed position may be reported a few
  // bytes past the last insert. two_phase exists from PostgreSQL 14 on, conflicting from 16;
  // failover, synced, invalidation_reason and inactive_since from 17 (docs/pgoutput.md §1).
  return fmt::format(
      "WITH here AS (SELECT CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_last_wal_replay_lsn() "
      "ELSE pg_catalog.pg_current_wal_lsn() END AS lsn) "
      "SELECT s.slot_name, s.plugin, s.database, s.active, s.active_pid, s.confirmed_flush_lsn, s.restart_lsn, "
      "s.wal_status, here.lsn, "
      "GREATEST(COALESCE(pg_catalog.pg_wal_lsn_diff(here.lsn, s.confirmed_flush_lsn), 0), 0)::bigint, "
      "GREATEST(COALESCE(pg_catalog.pg_wal_lsn_diff(here.lsn, s.restart_lsn), 0), 0)::bigint, "
      "s.safe_wal_size, {}, {}, {}, {} "
      "FROM pg_catalog.pg_replication_slots s, here WHERE s.slot_name = {}",
      server_version >= 140000 ? "s.two_phase" : "false",
      server_version >= 170000 ? "s.failover, s.synced, s.invalidation_reason" : "NULL::bool, NULL::bool, NULL::text",
      server_version >= 160000 ? "s.conflicting" : "NULL::bool",
      server_version >= 170000 ? "s.inactive_since::text" : "NULL::text", slot_literal);
}

SlotState slot_state(const pg_result* result, int row) {
  const PGresult* r = result;
  SlotState s;
  s.slot = text_at(r, row, 0);
  s.plugin = text_at(r, row, 1);
  s.database = text_at(r, row, 2);
  s.active = text_at(r, row, 3) == "t";
  if (const auto pid = int_at(r, row, 4)) s.active_pid = static_cast<int>(*pid);
  s.confirmed_flush = lsn_at(r, row, 5);
  s.restart_lsn = lsn_at(r, row, 6);
  s.wal_status = parse_wal_status(text_at(r, row, 7));
  s.current_wal = lsn_at(r, row, 8);
  s.lag_bytes = int_at(r, row, 9).value_or(0);
  s.retained_wal_bytes = int_at(r, row, 10).value_or(0);
  s.safe_wal_size_bytes = int_at(r, row, 11);
  s.two_phase = text_at(r, row, 12) == "t";
  if (!PQgetisnull(r, row, 13)) s.failover = text_at(r, row, 13) == "t";
  if (!PQgetisnull(r, row, 14)) s.synced = text_at(r, row, 14) == "t";
  if (!PQgetisnull(r, row, 15)) s.invalidation_reason = text_at(r, row, 15);
  if (!PQgetisnull(r, row, 16)) s.conflicting = text_at(r, row, 16) == "t";
  if (!PQgetisnull(r, row, 17)) s.inactive_since = text_at(r, row, 17);
  return s;
}

std::optional<SlotProblem> validate_slot(const SlotState& slot, std::string_view database) {
  using Cause = SlotProblem::Cause;
  if (slot.plugin != "pgoutput") {
    return SlotProblem{
        Cause::not_logical,
        fmt::format("uses plugin {}; pgoutbox needs pgoutput",
                    slot.plugin.empty() ? std::string("(none: a physical slot)") : slot.plugin),
        "choose another postgres.slot, or drop this one if nothing needs it (pgoutbox slot drop -c FILE --yes)"};
  }
  if (!database.empty() && !slot.database.empty() && slot.database != database) {
    return SlotProblem{Cause::other_database, fmt::format("belongs to database {}, not {}", slot.database, database),
                       "point postgres.dsn at that database, or choose another postgres.slot"};
  }
  if (slot.invalidation_reason || slot.wal_status == WalStatus::lost || slot.conflicting == true) {
    const auto cause = invalidation_of(slot);
    return SlotProblem{
        Cause::invalidated,
        fmt::format("is invalidated ({}): {}, so the outbox rows written since {} can no longer be streamed",
                    cause.shown, cause.why, slot.confirmed_flush.to_string()),
        "drop it (pgoutbox slot drop -c FILE --yes), let pgoutbox create a new one, and re-publish the outbox rows "
        "committed since the last event Kafka holds: reconcile (docs/migrating.md, \"Publishing rows again\")" +
            cause.prevent};
  }
  if (slot.two_phase) {
    // pgoutbox relays committed transactions only; a two_phase slot sends prepared ones at
    // PREPARE TRANSACTION, before their fate is known (docs/pgoutput.md).
    return SlotProblem{Cause::two_phase,
                       "was created with two_phase = true; pgoutbox does not relay prepared transactions",
                       fmt::format("drop the slot and recreate it without two_phase (pgoutbox slot drop -c FILE --yes, "
                                   "then let pgoutbox create it, or SELECT pg_create_logical_replication_slot('{}', "
                                   "'pgoutput')); events committed in between must be re-published",
                                   slot.slot)};
  }
  return std::nullopt;
}

PublicationRefusal refuse_publication_after_slot(std::string_view slot, std::string_view create) {
  return PublicationRefusal{
      fmt::format("does not exist, and replication slot \"{}\" does: a publication created now would be missing for "
                  "every change the slot still has to decode, so pgoutbox does not create it",
                  slot),
      fmt::format("create the publication ({}), then drop the slot (pgoutbox slot drop -c FILE --yes) and let "
                  "pgoutbox create it; or advance the slot past the publication's creation (SELECT "
                  "pg_replication_slot_advance('{}', pg_current_wal_lsn())). Rows committed before that are not "
                  "relayed",
                  create, slot)};
}

}  // namespace pgoutbox::replication
