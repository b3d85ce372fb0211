#include "pgoutbox/diagnostics/slot_status.h"

#include <fmt/format.h>

#include "pgoutbox/logging/logging.h"

namespace pgoutbox::diagnostics {
namespace {

// SQLSTATEs of pg_drop_replication_slot (errcodes.txt): the slot is held by a session, or gone.
constexpr const char* kObjectInUse = "55006";
constexpr const char* kUndefinedObject = "42704";

std::string lsn_text(Lsn lsn) { return lsn == Lsn{} ? std::string() : lsn.to_string(); }

}  // namespace

replication::Connection connect_ordinary(const config::Config& config, const std::string& purpose) {
  return replication::Connection::open(config.postgres.dsn, false, config.postgres.application_name + "-" + purpose,
                                       config.postgres.password);
}

std::optional<SlotStatus> read_slot_status(const replication::Connection& conn, const std::string& slot) {
  const auto state = conn.slot(slot);
  if (!state) return std::nullopt;
  SlotStatus s;
  s.slot = state->slot;
  s.plugin = state->plugin;
  s.database = state->database;
  s.active = state->active;
  s.active_pid = state->active_pid;
  s.confirmed_flush_lsn = lsn_text(state->confirmed_flush);
  s.restart_lsn = lsn_text(state->restart_lsn);
  s.current_wal_lsn = lsn_text(state->current_wal);
  s.lag_bytes = state->lag_bytes;
  s.retained_wal_bytes = state->retained_wal_bytes;
  s.wal_status = std::string(replication::to_string(state->wal_status));
  s.safe_wal_size_bytes = state->safe_wal_size_bytes;
  s.state = *state;
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
  // Columns the server's major lacks (conflicting before 16, the rest before 17) are null.
  const auto optional_bool = [](const std::optional<bool>& v) {
    return v ? std::string(*v ? "true" : "false") : std::string("null");
  };
  const auto server_string = [&json_string](const std::optional<std::string>& v) {
    return v ? json_string(*v) : std::string("null");
  };
  return fmt::format(
      "{{\"slot\":{},\"plugin\":{},\"database\":{},\"active\":{},\"active_pid\":{},\"confirmed_flush_lsn\":{},"
      "\"restart_lsn\":{},\"current_wal_lsn\":{},\"lag_bytes\":{},\"retained_wal_bytes\":{},\"wal_status\":{},"
      "\"safe_wal_size_bytes\":{},\"failover\":{},\"synced\":{},\"conflicting\":{},\"invalidation_reason\":{},"
      "\"inactive_since\":{}}}",
      json_string(s.slot), optional_string(s.plugin), optional_string(s.database), s.active ? "true" : "false",
      optional_number(s.active_pid), optional_string(s.confirmed_flush_lsn), optional_string(s.restart_lsn),
      optional_string(s.current_wal_lsn), s.lag_bytes, s.retained_wal_bytes, optional_string(s.wal_status),
      optional_number(s.safe_wal_size_bytes), optional_bool(s.state.failover), optional_bool(s.state.synced),
      optional_bool(s.state.conflicting), server_string(s.state.invalidation_reason),
      server_string(s.state.inactive_since));
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
  // "-" where the server's major lacks the column (conflicting before 16, the rest before 17).
  const auto yes_no = [](const std::optional<bool>& v) { return v ? std::string(*v ? "yes" : "no") : "-"; };
  line("failover", yes_no(s.state.failover));
  line("synced", yes_no(s.state.synced));
  line("conflicting", yes_no(s.state.conflicting));
  line("invalidation_reason", s.state.invalidation_reason.value_or("-"));
  line("inactive_since", s.state.inactive_since.value_or("-"));
  return out;
}

DropOutcome drop_slot(const replication::Connection& conn, const std::string& slot) {
  const auto status = read_slot_status(conn, slot);
  if (!status) return {DropResult::missing, std::nullopt, {}};
  if (status->active) return {DropResult::active, status->active_pid, {}};
  try {
    conn.exec("SELECT pg_catalog.pg_drop_replication_slot(" + conn.literal(slot) + ")");
  } catch (const replication::PgError& e) {
    // A session may take the slot, or another drop may win, between the read and the drop.
    if (e.sqlstate() == kObjectInUse) {
      const auto now = read_slot_status(conn, slot);
      return {DropResult::active, now ? now->active_pid : std::nullopt, {}};
    }
    if (e.sqlstate() == kUndefinedObject) return {DropResult::missing, std::nullopt, {}};
    throw;
  }
  DropOutcome dropped{DropResult::dropped, std::nullopt, {}};
  for (const auto suffix : {config::kBackfillingSuffix, config::kBackfilledSuffix}) {
    const std::string marker = slot + std::string(suffix);
    const auto rows = conn.exec(
        "SELECT pg_catalog.pg_drop_replication_slot(slot_name) FROM pg_catalog.pg_replication_slots WHERE slot_name "
        "= " +
        conn.literal(marker) + " AND slot_type = 'physical' AND NOT active");
    if (PQntuples(rows.get()) > 0) dropped.markers.push_back(marker);
  }
  return dropped;
}

}  // namespace pgoutbox::diagnostics
