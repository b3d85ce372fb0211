#pragma once

// The libpq side of logical replication: a connection with replication=database set up like
// Postgres's own subscriber (libpqwalreceiver.c), the replication commands, and the slot and
// publication checks that must pass before START_REPLICATION (docs/pgoutput.md §1).

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "pgoutbox/lsn.h"
#include "pgoutbox/replication/failure_cause.h"
#include "pgoutbox/replication/slot.h"
#include "pgoutbox/secrets.h"

namespace pgoutbox::replication {

// A failure reported by the server or libpq, with the server's diagnostic fields when it sent
// them (PG_DIAG_SQLSTATE, PG_DIAG_MESSAGE_DETAIL, PG_DIAG_MESSAGE_HINT), so callers classify
// on structure: a busy slot (55006) is not a lost connection. Its message has passed
// redact_secrets: libpq quotes parts of the DSN it cannot parse, a password among them.
class PgError : public std::runtime_error {
 public:
  struct Fields {
    std::string sqlstate;  // empty: libpq's own failure (connecting, connection lost)
    std::string detail;
    std::string hint;
    bool connection_bad = false;                  // libpq's connection status was CONNECTION_BAD afterwards
    std::optional<FailureCause> connect_failure;  // set by Connection::open when it could not connect
  };
  PgError(const std::string& what, std::string sqlstate) : std::runtime_error(redact_secrets(what)) {
    fields_.sqlstate = std::move(sqlstate);
  }
  PgError(const std::string& what, Fields fields)
      : std::runtime_error(redact_secrets(what)), fields_(std::move(fields)) {}
  const std::string& sqlstate() const { return fields_.sqlstate; }
  const Fields& fields() const { return fields_; }

 private:
  Fields fields_;
};

// Every setting that changes the text form of a value pgoutbox reads (docs/pgoutput.md: pgoutput
// sends values through the type output functions of the walsender's session), fixed on every
// connection pgoutbox opens, as libpqwalreceiver.c does for a subscriber: bytea as hex, ISO
// dates in UTC, intervals in the postgres style, floats round-tripping. A database, role or
// postgresql.conf setting such as bytea_output = escape would otherwise change the payload.
inline constexpr const char* kClientEncoding = "UTF8";
inline constexpr const char* kSessionOptions =
    "-c bytea_output=hex -c datestyle=ISO -c intervalstyle=postgres -c extra_float_digits=3 -c TimeZone=UTC";

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
  // that might be logged. A `connect_timeout` above zero bounds the connection's establishment
  // (libpq's connect_timeout, over the DSN's own).
  static Connection open(const std::string& dsn, bool replication, const std::string& application_name,
                         const std::string& password = "",
                         std::chrono::seconds connect_timeout = std::chrono::seconds(0));

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
  // The same, exporting the slot's snapshot (SNAPSHOT 'export' from 15, EXPORT_SNAPSHOT on 14):
  // a plain connection can read the database as of the consistent point with SET TRANSACTION
  // SNAPSHOT, but only while this connection runs no other command (docs/pgoutput.md §1).
  struct ExportedSlot {
    Lsn consistent_point;
    std::string snapshot;
  };
  ExportedSlot create_slot_exporting(const std::string& name, bool failover = false) const;
  // CREATE_REPLICATION_SLOT … PHYSICAL without RESERVE_WAL: a slot that pins no WAL, used as a
  // durable marker beside the logical slot (relay/backfill.h).
  void create_marker_slot(const std::string& name) const;
  // Takes, for the life of this session, the advisory lock that says "this process is creating
  // or backfilling slot `name`" (relay/backfill.h); false while another session holds it. The
  // lock goes with the session, also when its process dies.
  bool try_backfill_lock(const std::string& name) const;
  // DROP_REPLICATION_SLOT; a missing slot is no error.
  void drop_slot(const std::string& name) const;
  std::optional<PublicationState> publication(const std::string& name) const;
  // The CREATE PUBLICATION statement pgoutbox runs for the tables, and runs it.
  // `generated_columns`: with publish_generated_columns = stored (18; generated_columns.h).
  std::string create_publication_sql(const std::string& name, const std::vector<TableName>& tables,
                                     bool generated_columns = false) const;
  void create_publication(const std::string& name, const std::vector<TableName>& tables,
                          bool generated_columns = false) const;
  // True when `table` is partitioned (relkind 'p').
  bool is_partitioned(const TableName& table) const;

  // START_REPLICATION: on success the connection is in CopyBoth mode. Reads the server's
  // wal_sender_timeout first (SHOW), for the stream's own receive timeout.
  void start_replication(const StartOptions& options);
  // wal_sender_timeout as read by start_replication; 0 when disabled or not read.
  std::chrono::milliseconds wal_sender_timeout() const { return wal_sender_timeout_; }

 private:
  explicit Connection(PGconn* conn) : conn_(conn) {}
  std::unique_ptr<PGconn, PgConnDeleter> conn_;
  std::chrono::milliseconds wal_sender_timeout_{0};
};

// A duration as SHOW prints it ("60s", "1min", "500ms", "0"); nullopt when not understood.
std::optional<std::chrono::milliseconds> parse_show_duration(const std::string& text);

struct PublicationProblem {
  enum class Cause {
    missing,            // the publication does not exist
    no_inserts,         // it does not publish inserts
    table_missing,      // a configured table does not exist
    table_left_out,     // it does not include a configured table
    children_left_out,  // it leaves out inheritance children of a configured table
  };
  Cause cause;
  std::string message;  // what is wrong and the fix
};

// nullopt when `publication` exists and publishes the inserts of every table in `tables` (and
// of their inheritance children); a failed query throws PgError. With `describe`, each covered
// table's layout is logged (describe_relaying): at connect, not at every check while streaming.
[[nodiscard]] std::optional<PublicationProblem> check_publication_covers(const Connection& conn,
                                                                         const std::string& publication,
                                                                         const std::vector<TableName>& tables,
                                                                         bool describe = true);

// The server's clock (now()) in microseconds since the Unix epoch, the scale of the commit times
// the relay keeps (pgoutput::to_unix_micros).
std::int64_t server_time_unix_micros(const Connection& conn);

}  // namespace pgoutbox::replication
