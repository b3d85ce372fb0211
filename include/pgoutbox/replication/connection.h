#pragma once

// The libpq side of logical replication: a connection with replication=database set up like
// Postgres's own subscriber (libpqwalreceiver.c), the replication commands, and the slot and
// publication checks that must pass before START_REPLICATION (PGOUTPUT.md §1).

#include <libpq-fe.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "pgoutbox/lsn.h"

namespace pgoutbox::replication {

// A failure reported by the server or libpq, with the SQLSTATE when the server gave one, so
// callers can tell a busy slot (55006) from a missing publication or a lost slot (55000).
class PgError : public std::runtime_error {
 public:
  PgError(const std::string& what, std::string sqlstate) : std::runtime_error(what), sqlstate_(std::move(sqlstate)) {}
  const std::string& sqlstate() const { return sqlstate_; }

 private:
  std::string sqlstate_;
};

struct PgConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct PgResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResultPtr = std::unique_ptr<PGresult, PgResultDeleter>;

// A schema-qualified table name. Names are kept as the catalog spells them (unquoted case).
struct TableName {
  std::string schema = "public";
  std::string name;
  // "schema"."name", quoted for SQL.
  std::string quoted() const;
  bool operator==(const TableName&) const = default;
};

struct SystemIdentity {
  std::string system_id;
  int timeline = 0;
  Lsn xlogpos;
  std::string dbname;
};

struct SlotState {
  std::string plugin;
  std::string database;
  bool active = false;
  std::optional<int> active_pid;
  Lsn confirmed_flush;
  Lsn restart_lsn;
  std::string wal_status;  // reserved, extended, unreserved, lost
  // Columns that only some majors have (ServerFeatures says which); nullopt where absent.
  std::optional<bool> two_phase;                   // 14
  std::optional<bool> failover;                    // 17
  std::optional<bool> synced;                      // 17: a standby's copy of a failover slot
  std::optional<std::string> invalidation_reason;  // 17: NULL while valid
};

struct PublicationState {
  bool all_tables = false;
  bool publishes_insert = false;
  bool via_root = false;
  std::vector<TableName> tables;  // as published (leaf partitions appear unless via_root)
};

struct StartOptions {
  std::string slot;
  Lsn start;  // 0/0: resume from the slot's confirmed position
  int proto_version = 1;
  std::vector<std::string> publications;
  bool messages = true;  // logical decoding messages (pg_logical_emit_message)
};

class Connection {
 public:
  // Connects with `dsn` (libpq conninfo or URI). With `replication`, the session is a logical
  // walsender (replication=database): replication commands and simple-protocol SQL only.
  // `password`, when not empty, is passed apart from the DSN so that it never sits in a string
  // that might be logged.
  static Connection open(const std::string& dsn, bool replication, const std::string& application_name,
                         const std::string& password = "");

  Connection(Connection&&) noexcept = default;
  Connection& operator=(Connection&&) noexcept = default;

  PGconn* raw() const { return conn_.get(); }
  int server_version() const { return PQserverVersion(conn_.get()); }
  // The highest pgoutput proto_version this server accepts: 14 → 2, 15 → 3, 16 and later → 4.
  int max_proto_version() const;

  // Simple-protocol statements; throw PgError on failure.
  PgResultPtr exec(const std::string& sql) const;
  std::string literal(const std::string& value) const;
  std::string identifier(const std::string& value) const;

  SystemIdentity identify_system() const;
  std::optional<SlotState> slot(const std::string& name) const;
  // CREATE_REPLICATION_SLOT … LOGICAL pgoutput without a snapshot, in the syntax the server
  // understands (the option list from 15, the keyword form before); `failover` (17) marks the
  // slot for synchronisation to standbys. Returns the consistent point.
  Lsn create_slot(const std::string& name, bool failover = false) const;
  std::optional<PublicationState> publication(const std::string& name) const;
  void create_publication(const std::string& name, const std::vector<TableName>& tables) const;
  // True when `table` is partitioned (relkind 'p').
  bool is_partitioned(const TableName& table) const;

  // START_REPLICATION: on success the connection is in CopyBoth mode.
  void start_replication(const StartOptions& options) const;

 private:
  explicit Connection(PGconn* conn) : conn_(conn) {}
  std::unique_ptr<PGconn, PgConnDeleter> conn_;
};

// Throws PgError naming what is wrong when a publication does not exist or does not publish
// inserts of every table in `tables`.
void check_publication_covers(const Connection& conn, const std::string& publication,
                              const std::vector<TableName>& tables);

}  // namespace pgoutbox::replication
