#pragma once

// The parts of `pgoutbox check` on the Postgres side, each appending its findings. They share
// one ordinary connection; a failed query becomes a finding, never an exception.

#include <string>
#include <vector>

#include "pgoutbox/config/config.h"
#include "pgoutbox/diagnostics/finding.h"
#include "pgoutbox/diagnostics/platform.h"
#include "pgoutbox/replication/connection.h"

namespace pgoutbox::diagnostics::detail {

struct CheckContext {
  const config::Config& config;
  const replication::Connection& conn;
  std::string user;      // current_user
  std::string database;  // current_database()
  std::vector<Finding>& findings;
  // What check_platform read and decided; the later checks name this platform's fixes.
  ServerSignals signals{};
  Recognition platform{};
};

// Which managed platform the server is (an ok finding naming it and what gave it away), and a
// warning when the DSN's endpoint is a connection pooler's by its address.
void check_platform(CheckContext& ctx);
// wal_level, max_replication_slots, max_wal_senders.
void check_server(CheckContext& ctx);
// LOGIN, REPLICATION (or superuser), and that a replication connection really opens.
void check_role(CheckContext& ctx);
// Each outbox table: exists, SELECT, the publication covers it, its columns serve the mapping;
// and the publication itself (exists, publishes inserts, deletes do not need a replica identity).
void check_tables(CheckContext& ctx);
// The slot: exists or will be created, pgoutput, this database, not lost, who holds it, lag.
void check_slot(CheckContext& ctx);
// PostgreSQL 17+: whether the slot is synchronised to standbys (failover, synced).
void check_slot_failover(CheckContext& ctx);
// PostgreSQL 18+: idle_replication_slot_timeout against the downtime to plan for, and when it
// invalidates the slot if the slot is idle now.
void check_idle_slot_timeout(CheckContext& ctx);

// A query's first row as text (NULL as ""); throws replication::PgError.
std::vector<std::string> first_row(const replication::Connection& conn, const std::string& sql);

// "public.outbox", or "\"Sales\".\"Order Events\"" when a name needs quoting.
std::string table_label(const config::TableConfig& table);

}  // namespace pgoutbox::diagnostics::detail
