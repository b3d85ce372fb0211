#pragma once

// The replication slot as an operator sees it (`pgoutbox status`, `pgoutbox slot drop`): read
// from pg_replication_slots over an ordinary connection, with the lag measured against the
// server's current WAL position.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pgoutbox/config/config.h"
#include "pgoutbox/replication/connection.h"

namespace pgoutbox::diagnostics {

struct SlotStatus {
  std::string slot;
  std::string plugin;
  std::string database;
  bool active = false;
  std::optional<int> active_pid;
  std::string confirmed_flush_lsn;  // as Postgres prints it; empty when NULL
  std::string restart_lsn;
  std::string current_wal_lsn;  // pg_current_wal_lsn() when read
  // pg_current_wal_lsn() - confirmed_flush_lsn: WAL written since the last confirmation.
  std::int64_t lag_bytes = 0;
  // pg_current_wal_lsn() - restart_lsn: WAL the server keeps for this slot.
  std::int64_t retained_wal_bytes = 0;
  std::string wal_status;                           // reserved, extended, unreserved, lost; empty when NULL
  std::optional<std::int64_t> safe_wal_size_bytes;  // before max_slot_wal_keep_size invalidates it
  replication::SlotState state;                     // the same, typed, for validate_slot
};

// An ordinary connection with the configuration's DSN and password (never printed).
replication::Connection connect_ordinary(const config::Config& config, const std::string& purpose);

// nullopt when the slot does not exist. Throws replication::PgError when the query fails.
std::optional<SlotStatus> read_slot_status(const replication::Connection& conn, const std::string& slot);

// One JSON object; strings escaped per RFC 8259, absent values as null.
std::string to_json(const SlotStatus& status);
// Aligned "name  value" lines for a terminal.
std::string to_text(const SlotStatus& status);

enum class DropResult { dropped, missing, active };
struct DropOutcome {
  DropResult result = DropResult::missing;
  std::optional<int> active_pid;     // who holds it, when active
  std::vector<std::string> markers;  // the backfill's marker slots dropped with it
};

// Drops the slot unless a session holds it, and then the backfill's marker slots of its name
// (<slot>_backfilling, <slot>_backfilled; physical, pinning no WAL) if there are any. Throws
// replication::PgError on other failures.
DropOutcome drop_slot(const replication::Connection& conn, const std::string& slot);

}  // namespace pgoutbox::diagnostics
