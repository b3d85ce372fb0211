#pragma once

// The checks behind `pgoutbox check`: everything `pgoutbox run` needs from PostgreSQL and Kafka,
// looked at without starting to stream. Postgres is read through an ordinary (non-replication)
// connection with the configured credentials; Kafka through one metadata request. Each check
// yields findings; none throws for what it finds.

#include <chrono>
#include <vector>

#include "pgoutbox/config/config.h"
#include "pgoutbox/diagnostics/finding.h"

namespace pgoutbox::diagnostics {

// wal_level, max_replication_slots and max_wal_senders, the role's LOGIN and REPLICATION, a
// replication connection, each outbox table (exists, SELECT, columns and types against the
// mapping), the publication (exists, publishes inserts, covers each table, via the root for a
// partitioned one) and the slot (plugin, database, active pid, wal_status, lag).
std::vector<Finding> check_postgres(const config::Config& config);

// What `run` checks before each session, so that it fails at start, not at the first row, on
// what `check` would block: each configured table's columns against its mapping (topic template
// columns, payload, key, ...) as the catalog describes them (outbox::ResolvedTable, the relay's
// own resolution). One blocking finding per table whose mapping cannot be served; a table that
// does not exist is left to the relay (its own exit code). Throws replication::PgError when
// Postgres cannot be reached or queried: the relay's connection then decides.
std::vector<Finding> check_mappings(const config::Config& config);

// The subject of the finding that names the server's version and what pgoutbox uses of it; it
// blocks for PostgreSQL 13 and older, and `check` then exits with run's code for that case.
inline constexpr const char* kServerVersionSubject = "postgres version";

// True when `findings` hold the blocking server-version finding.
bool unsupported_server(const std::vector<Finding>& findings);

// The brokers answer a metadata request within `timeout` with the configured properties (TLS,
// SASL), and each static topic exists or the broker creates topics on first use.
std::vector<Finding> check_kafka(const config::Config& config, std::chrono::milliseconds timeout);

// Settings that weaken TLS or expose secrets, from the configuration alone: Postgres sslmode
// disable/allow/prefer (libpq's default), Kafka certificate verification off, a SASL password
// over a plaintext listener, and the loader's warnings (a secret file readable by others). Only
// warnings: `check` prints them, `run` logs them once at start.
std::vector<Finding> check_transport_security(const config::Config& config);

}  // namespace pgoutbox::diagnostics
