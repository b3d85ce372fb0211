#pragma once

// A logical replication slot as pg_replication_slots shows it, the one query that reads it
// (the relay's session, `check`, `status`, `slot drop` and the metrics monitor all use it),
// and the one set of rules a slot must pass before pgoutbox streams from it.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pgoutbox/lsn.h"

struct pg_result;  // libpq's PGresult

namespace pgoutbox::replication {

// pg_replication_slots.wal_status (PG13+); unknown when NULL (a slot that never reserved WAL).
enum class WalStatus { unknown, reserved, extended, unreserved, lost };
WalStatus parse_wal_status(std::string_view text);
std::string_view to_string(WalStatus status);  // "" for unknown

struct SlotState {
  std::string slot;
  std::string plugin;    // empty for a physical slot
  std::string database;  // empty for a physical slot
  bool active = false;
  std::optional<int> active_pid;
  Lsn confirmed_flush;  // 0/0 when NULL
  Lsn restart_lsn;
  WalStatus wal_status = WalStatus::unknown;
  bool two_phase = false;  // PG14+: decodes PREPARE TRANSACTION (Begin Prepare … Commit Prepared)
  // PostgreSQL 17 and later only (nullopt before): synchronised to physical standbys (failover),
  // this server's copy is such a synchronised one (synced), and why the slot was invalidated.
  std::optional<bool> failover;
  std::optional<bool> synced;
  std::optional<std::string> invalidation_reason;
  // 16 and later: the slot was invalidated by a recovery conflict on a standby (rows it needs
  // were vacuumed on the primary, or its wal_level fell below logical); such a slot cannot decode.
  std::optional<bool> conflicting;
  // 17 and later: when the slot was last released, as Postgres prints it; nullopt while active.
  std::optional<std::string> inactive_since;
  // Measured against the server's current WAL position (the replayed one on a standby),
  // clamped at 0: WAL written since the last confirmation, and WAL the slot pins.
  Lsn current_wal;
  std::int64_t lag_bytes = 0;
  std::int64_t retained_wal_bytes = 0;
  std::optional<std::int64_t> safe_wal_size_bytes;  // before max_slot_wal_keep_size invalidates it
};

// The SELECT that reads one slot; `slot_literal` is the slot name already quoted as an SQL
// literal. Its result has one row per slot found (none or one), read by slot_state().
std::string slot_query(std::string_view slot_literal, int server_version);
SlotState slot_state(const pg_result* result, int row);

struct SlotProblem {
  enum class Cause {
    not_logical,     // a physical slot, or another output plugin
    other_database,  // a logical slot of another database
    invalidated,     // wal_status lost, conflicting, or an invalidation_reason (idle_timeout in 18)
    two_phase,       // decodes prepared transactions, which pgoutbox does not relay
  };
  Cause cause;
  std::string message;  // what is wrong, as a predicate of the slot: "uses plugin …"
  std::string fix;      // what the operator does about it
};

// nullopt when pgoutbox can stream from the slot. `database` is the database pgoutbox is
// connected to; empty skips that rule.
std::optional<SlotProblem> validate_slot(const SlotState& slot, std::string_view database);

// The publication does not exist and the slot does. pgoutput reads publications as of the
// position it decodes, so one created now would be missing for every change the slot still has
// to decode and the stream would fail forever (docs/pgoutput.md): `run` refuses to create it
// (exit 12) and `check` blocks with the same words. `create` is the CREATE PUBLICATION statement
// that fits the configured tables.
struct PublicationRefusal {
  std::string message;  // a predicate of the publication: "does not exist, and …"
  std::string fix;
};
PublicationRefusal refuse_publication_after_slot(std::string_view slot, std::string_view create);

}  // namespace pgoutbox::replication
