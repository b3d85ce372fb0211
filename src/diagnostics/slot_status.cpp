#include "pgoutbox/diagnostics/slot_status.h"

#include <fmt/format.h>

#include "pgoutbox/logging/logging.h"

namespace pgoutbox::diagnostics {
namespace {

// SQLSTATEs of pg_drop_replication_slot (errcodes.txt): the slot is held by a session, or gone.
constexpr const char* kObjectInUse = "55006";
constexpr const char* kUndefinedObject = "42704";

std::string text_at(const PGresult* res, int col) {
  return PQgetisnull(res, 0, col) ? std::string() : std::string(PQgetvalue(res, 0, col));
}

std::optional<std::int64_t> int_at(const PGresult* res, int col) {
  if (PQgetisnull(res, 0, col)) return std::nullopt;
  return std::stoll(PQgetvalue(res, 0, col));
}

}  // namespace

replication::Connection connect_ordinary(const config::Config& config, const std::string& purpose) {
  return replication::Connection::open(config.postgres.dsn, false, config.postgres.application_name + "-" + purpose,
                                       config.postgres.password);
}

std::optional<SlotStatus> read_slot_status(const replication::Connection& conn, const std::string& slot) {
  // On a standby the server's position is the replayed one (pg_current_wal_lsn() would fail).
  // Differences are clamped at 0: an idle slot's confirmed position may be reported a few
  // bytes past the last insert.
  auto res = conn.exec(
      "WITH here AS (SELECT CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_last_wal_replay_lsn() "
      "ELSE pg_catalog.pg_current_wal_lsn() END AS lsn) "
      "SELECT s.slot_name, s.plugin, s.database, s.active, s.active_pid, s.confirmed_flush_lsn, s.restart_lsn, "
      "s.wal_status, here.lsn, "
      "GREATEST(COALESCE(pg_catalog.pg_wal_lsn_diff(here.lsn, s.confirmed_flush_lsn), 0), 0)::bigint, "
      "GREATEST(COALESCE(pg_catalog.pg_wal_lsn_diff(here.lsn, s.restart_lsn), 0), 0)::bigint, "
      "s.safe_wal_size "
      "FROM pg_catalog.pg_replication_slots s, here WHERE s.slot_name = " +
      conn.literal(slot));
  if (PQntuples(res.get()) == 0) return std::nullopt;
  const PGresult* r = res.get();
  SlotStatus s;
  s.slot = text_at(r, 0);
  s.plugin = text_at(r, 1);
  s.database = text_at(r, 2);
  s.active = text_at(r, 3) == "t";
  if (const auto pid = int_at(r, 4)) s.active_pid = static_cast<int>(*pid);
  s.confirmed_flush_lsn = text_at(r, 5);
  s.restart_lsn = text_at(r, 6);
  s.wal_status = text_at(r, 7);
  s.current_wal_lsn = text_at(r, 8);
  s.lag_bytes = int_at(r, 9).value_or(0);
  s.retained_wal_bytes = int_at(r, 10).value_or(0);
  s.safe_wal_size_bytes = int_at(r, 11);
  return s;
}

std::string to_json(const SlotStatus& s) {
  const auto json_string = [](const std::string& v) {
    std::string out = "\"";
    logging::append_json_escaped(out, v);
    return out + "\"";
  };
  const auto optional_string = [&json_string](const std::string& v) {
    return v.empty() ? std::string("null") : json_string(v);
  };
  const auto optional_number = [](const auto& v) { return v ? fmt::format("{}", *v) : std::string("null"); };
  return fmt::format(
      "{{\"slot\":{},\"plugin\":{},\"database\":{},\"active\":{},\"active_pid\":{},\"confirmed_flush_lsn\":{},"
      "\"restart_lsn\":{},\"current_wal_lsn\":{},\"lag_bytes\":{},\"retained_wal_bytes\":{},\"wal_status\":{},"
      "\"safe_wal_size_bytes\":{}}}",
      json_string(s.slot), optional_string(s.plugin), optional_string(s.database), s.active ? "true" : "false",
      optional_number(s.active_pid), optional_string(s.confirmed_flush_lsn), optional_string(s.restart_lsn),
      optional_string(s.current_wal_lsn), s.lag_bytes, s.retained_wal_bytes, optional_string(s.wal_status),
      optional_number(s.safe_wal_size_bytes));
}

std::string to_text(const SlotStatus& s) {
  const auto or_dash = [](const std::string& v) { return v.empty() ? std::string("-") : v; };
  std::string out;
  const auto line = [&](const char* name, const std::string& value) { out += fmt::format("{:<20}{}\n", name, value); };
  line("slot", s.slot);
  line("plugin", or_dash(s.plugin));
  line("database", or_dash(s.database));
  line("active", s.active ? (s.active_pid ? fmt::format("yes (pid {})", *s.active_pid) : std::string("yes")) : "no");
  line("confirmed_flush_lsn", or_dash(s.confirmed_flush_lsn));
  line("restart_lsn", or_dash(s.restart_lsn));
  line("current_wal_lsn", or_dash(s.current_wal_lsn));
  line("lag", fmt::format("{} bytes", s.lag_bytes));
  line("retained_wal", fmt::format("{} bytes", s.retained_wal_bytes));
  line("wal_status", or_dash(s.wal_status));
  line("safe_wal_size",
       s.safe_wal_size_bytes ? fmt::format("{} bytes", *s.safe_wal_size_bytes) : std::string("unlimited"));
  return out;
}

DropOutcome drop_slot(const replication::Connection& conn, const std::string& slot) {
  const auto status = read_slot_status(conn, slot);
  if (!status) return {DropResult::missing, std::nullopt};
  if (status->active) return {DropResult::active, status->active_pid};
  try {
    conn.exec("SELECT pg_catalog.pg_drop_replication_slot(" + conn.literal(slot) + ")");
  } catch (const replication::PgError& e) {
    // A session may take the slot, or another drop may win, between the read and the drop.
    if (e.sqlstate() == kObjectInUse) {
      const auto now = read_slot_status(conn, slot);
      return {DropResult::active, now ? now->active_pid : std::nullopt};
    }
    if (e.sqlstate() == kUndefinedObject) return {DropResult::missing, std::nullopt};
    throw;
  }
  return {DropResult::dropped, std::nullopt};
}

}  // namespace pgoutbox::diagnostics
