#include "pgoutbox/replication/connection.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "pgoutbox/replication/catalog.h"

#include "pgoutbox/replication/failure_cause.h"
#include "pgoutbox/replication/server_features.h"

namespace pgoutbox::replication {
namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

PgError::Fields fields_of(const PGresult* res, const PGconn* conn) {
  const auto field = [res](int code) {
    const char* v = res != nullptr ? PQresultErrorField(res, code) : nullptr;
    return v != nullptr ? std::string(v) : std::string();
  };
  return PgError::Fields{field(PG_DIAG_SQLSTATE), field(PG_DIAG_MESSAGE_DETAIL), field(PG_DIAG_MESSAGE_HINT),
                         PQstatus(conn) == CONNECTION_BAD, std::nullopt};
}

// `value` through PQescapeLiteral or PQescapeIdentifier, which quote by the connection's encoding.
std::string escaped(PGconn* conn, const std::string& value, char* (*escape)(PGconn*, const char*, size_t)) {
  char* quoted = escape(conn, value.data(), value.size());
  if (quoted == nullptr) throw PgError(trim(PQerrorMessage(conn)), "");
  std::string out(quoted);
  PQfreemem(quoted);
  return out;
}

Lsn parse_lsn_or_zero(const char* text) {
  if (text == nullptr) return Lsn{};
  return Lsn::parse(text).value_or(Lsn{});
}

}  // namespace

std::string TableName::quoted() const {
  const auto quote = [](const std::string& id) {
    std::string out = "\"";
    for (const char c : id) {
      if (c == '"') out.push_back('"');
      out.push_back(c);
    }
    out.push_back('"');
    return out;
  };
  return quote(schema) + "." + quote(name);
}

Connection Connection::open(const std::string& dsn, bool replication, const std::string& application_name,
                            const std::string& password, std::chrono::seconds connect_timeout) {
  // Later keywords override the DSN's. The settings travel in the startup packet: a walsender
  // need not accept SET, and startup options outrank postgresql.conf, ALTER DATABASE and
  // ALTER ROLE settings.
  std::vector<const char*> keys = {"dbname", "replication", "application_name", "client_encoding", "options"};
  std::vector<const char*> values = {dsn.c_str(), replication ? "database" : "false", application_name.c_str(),
                                     kClientEncoding, kSessionOptions};
  const std::string timeout = std::to_string(connect_timeout.count());
  if (connect_timeout.count() > 0) {
    keys.push_back("connect_timeout");
    values.push_back(timeout.c_str());
  }
  if (!password.empty()) {
    keys.push_back("password");
    values.push_back(password.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* raw = PQconnectdbParams(keys.data(), values.data(), 1);
  Connection conn(raw);
  if (raw == nullptr) throw PgError("out of memory creating a libpq connection", "");
  if (PQstatus(raw) != CONNECTION_OK) {
    const std::string message = trim(PQerrorMessage(raw));
    const auto failure = connect_failure_of(PQconnectionNeedsPassword(raw) == 1, message);
    // A TLS failure carries its fix here: its message alone would not say what to change.
    const bool tls = failure == FailureCause::tls_untrusted || failure == FailureCause::tls_host_mismatch ||
                     failure == FailureCause::tls_client_cert;
    throw PgError(tls ? fmt::format("cannot connect to PostgreSQL: {}. Fix: {}", message, connect_fix(failure))
                      : fmt::format("cannot connect to PostgreSQL: {}", message),
                  PgError::Fields{{}, {}, {}, true, failure});
  }
  return conn;
}

int Connection::max_proto_version() const { return features_of(server_version()).proto_version; }

PgResultPtr Connection::exec(const std::string& sql) const {
  PgResultPtr res(PQexec(conn_.get(), sql.c_str()));
  const auto status = PQresultStatus(res.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK && status != PGRES_COPY_BOTH) {
    throw PgError(trim(PQerrorMessage(conn_.get())), fields_of(res.get(), conn_.get()));
  }
  return res;
}

std::string Connection::literal(const std::string& value) const { return escaped(conn_.get(), value, PQescapeLiteral); }

std::string Connection::identifier(const std::string& value) const {
  return escaped(conn_.get(), value, PQescapeIdentifier);
}

SystemIdentity Connection::identify_system() const {
  auto res = exec("IDENTIFY_SYSTEM");
  if (PQntuples(res.get()) != 1 || PQnfields(res.get()) < 4) {
    throw PgError("IDENTIFY_SYSTEM returned an unexpected result (is this a replication connection?)", "");
  }
  return SystemIdentity{PQgetvalue(res.get(), 0, 0), std::stoi(PQgetvalue(res.get(), 0, 1)),
                        parse_lsn_or_zero(PQgetvalue(res.get(), 0, 2)),
                        PQgetisnull(res.get(), 0, 3) ? "" : PQgetvalue(res.get(), 0, 3)};
}

std::optional<SlotState> Connection::slot(const std::string& name) const {
  auto res = exec(slot_query(literal(name), server_version()));
  if (PQntuples(res.get()) == 0) return std::nullopt;
  return slot_state(res.get(), 0);
}

Lsn Connection::create_slot(const std::string& name, bool failover) const {
  const auto features = features_of(server_version());
  require_failover_support(features, failover);
  // 14 answers the option list with a syntax error (42601); its keyword form is NOEXPORT_SNAPSHOT.
  const std::string options = !features.slot_options_list ? " NOEXPORT_SNAPSHOT"
                              : failover                  ? " (SNAPSHOT 'nothing', FAILOVER true)"
                                                          : " (SNAPSHOT 'nothing')";
  auto res = exec("CREATE_REPLICATION_SLOT " + identifier(name) + " LOGICAL pgoutput" + options);
  if (PQntuples(res.get()) != 1 || PQnfields(res.get()) < 2) {
    throw PgError("CREATE_REPLICATION_SLOT returned an unexpected result", "");
  }
  return parse_lsn_or_zero(PQgetvalue(res.get(), 0, 1));
}

Connection::ExportedSlot Connection::create_slot_exporting(const std::string& name, bool failover) const {
  const auto features = features_of(server_version());
  require_failover_support(features, failover);
  const std::string options = !features.slot_options_list ? " EXPORT_SNAPSHOT"
                              : failover                  ? " (SNAPSHOT 'export', FAILOVER true)"
                                                          : " (SNAPSHOT 'export')";
  auto res = exec("CREATE_REPLICATION_SLOT " + identifier(name) + " LOGICAL pgoutput" + options);
  // slot_name, consistent_point, snapshot_name, output_plugin.
  if (PQntuples(res.get()) != 1 || PQnfields(res.get()) < 3 || PQgetisnull(res.get(), 0, 2) != 0) {
    throw PgError("CREATE_REPLICATION_SLOT returned an unexpected result", "");
  }
  return ExportedSlot{parse_lsn_or_zero(PQgetvalue(res.get(), 0, 1)), PQgetvalue(res.get(), 0, 2)};
}

void Connection::create_marker_slot(const std::string& name) const {
  exec("CREATE_REPLICATION_SLOT " + identifier(name) + " PHYSICAL");
}

bool Connection::try_backfill_lock(const std::string& name) const {
  // A session-level lock, taken before CREATE_REPLICATION_SLOT: the exported snapshot needs the
  // connection to run nothing between the slot's creation and the backfill's end.
  auto res = exec("SELECT pg_catalog.pg_try_advisory_lock(pg_catalog.hashtextextended(" +
                  literal("pgoutbox backfill " + name) + ", 0))");
  return PQntuples(res.get()) == 1 && std::string_view(PQgetvalue(res.get(), 0, 0)) == "t";
}

void Connection::drop_slot(const std::string& name) const {
  if (slot(name)) exec("DROP_REPLICATION_SLOT " + identifier(name));
}

std::optional<PublicationState> Connection::publication(const std::string& name) const {
  auto res = exec("SELECT puballtables, pubinsert, pubviaroot FROM pg_catalog.pg_publication WHERE pubname = " +
                  literal(name));
  if (PQntuples(res.get()) == 0) return std::nullopt;
  PublicationState p;
  p.all_tables = std::string(PQgetvalue(res.get(), 0, 0)) == "t";
  p.publishes_insert = std::string(PQgetvalue(res.get(), 0, 1)) == "t";
  p.via_root = std::string(PQgetvalue(res.get(), 0, 2)) == "t";
  auto tables =
      exec("SELECT schemaname, tablename FROM pg_catalog.pg_publication_tables WHERE pubname = " + literal(name) +
           " ORDER BY 1, 2");
  for (int r = 0; r < PQntuples(tables.get()); ++r) {
    p.tables.push_back(TableName{PQgetvalue(tables.get(), r, 0), PQgetvalue(tables.get(), r, 1)});
  }
  return p;
}

bool Connection::is_partitioned(const TableName& table) const {
  // regclass: a missing table is the server's own 42P01, naming it.
  auto res = exec("SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = " + literal(table.quoted()) +
                  "::pg_catalog.regclass");
  return PQntuples(res.get()) == 1 && std::string(PQgetvalue(res.get(), 0, 0)) == "p";
}

std::string Connection::create_publication_sql(const std::string& name, const std::vector<TableName>& tables,
                                               bool generated_columns) const {
  std::string list;
  bool any_partitioned = false;
  for (const auto& t : tables) {
    if (!list.empty()) list += ", ";
    list += t.quoted();
    any_partitioned = any_partitioned || is_partitioned(t);
  }
  // Inserts only: cleanup deletes of the outbox are neither blocked nor sent (docs/pgoutput.md §4.5).
  // Partitioned outboxes publish through their root, so rows arrive under the root's relid.
  // Without tables (only a message outbox) the publication lists none: pgoutput needs one to
  // stream, and sends logical decoding messages whatever it lists.
  std::string sql = "CREATE PUBLICATION " + identifier(name) + (list.empty() ? "" : " FOR TABLE " + list) +
                    " WITH (publish = 'insert'";
  if (any_partitioned) sql += ", publish_via_partition_root = true";
  // 18: a stored generated column the mapping reads is sent only with this option.
  if (generated_columns) sql += ", publish_generated_columns = stored";
  return sql + ")";
}

void Connection::create_publication(const std::string& name, const std::vector<TableName>& tables,
                                    bool generated_columns) const {
  exec(create_publication_sql(name, tables, generated_columns));
}

std::optional<PublicationProblem> check_publication_covers(const Connection& conn, const std::string& publication,
                                                           const std::vector<TableName>& tables, bool describe) {
  using Cause = PublicationProblem::Cause;
  const auto pub = conn.publication(publication);
  if (!pub) {
    return PublicationProblem{Cause::missing,
                              fmt::format("publication \"{}\" does not exist: create it (CREATE PUBLICATION {} FOR "
                                          "TABLE … WITH (publish = 'insert')) or enable publication creation",
                                          publication, publication)};
  }
  if (!pub->publishes_insert) {
    return PublicationProblem{
        Cause::no_inserts,
        fmt::format("publication \"{}\" does not publish inserts: ALTER PUBLICATION {} SET (publish = 'insert')",
                    publication, publication)};
  }
  // Every relation whose rows belong to a configured table must be in the stream: the table
  // itself (or, for a partition, its root), and each inheritance child, which a publication
  // includes only when it is listed itself (one created after CREATE PUBLICATION, or excluded by
  // ONLY, never is). Partitions need nothing more: they are published with their root, at every
  // level, and pgoutbox maps them by ancestry whichever name they arrive under.
  for (const auto& table : tables) {
    const auto layout = describe_layout(conn, publication, *pub, table);
    if (!layout.exists) {
      return PublicationProblem{Cause::table_missing,
                                fmt::format("table {}.{} does not exist: create it, or remove it from tables: in "
                                            "the configuration",
                                            table.schema, table.name)};
    }
    if (!layout.published) {
      return PublicationProblem{
          Cause::table_left_out,
          fmt::format("publication \"{}\" does not include table {}.{}: ALTER PUBLICATION {} ADD TABLE {}", publication,
                      table.schema, table.name, publication, table.quoted())};
    }
    if (!layout.unpublished.empty()) {
      std::string names;
      for (const auto& c : layout.unpublished) names += (names.empty() ? "" : ", ") + c.quoted();
      return PublicationProblem{
          Cause::children_left_out,
          fmt::format("publication \"{}\" leaves out inheritance child(ren) {} of outbox table {}.{}: rows "
                      "inserted there would never reach pgoutbox. ALTER PUBLICATION {} ADD TABLE {} (a child "
                      "created after the publication, or excluded with ONLY, is not published)",
                      publication, names, table.schema, table.name, publication, names)};
    }
    if (describe)
      spdlog::info("table {}.{} {}", table.schema, table.name, describe_relaying(publication, *pub, table, layout));
  }
  return std::nullopt;
}

std::int64_t server_time_unix_micros(const Connection& conn) {
  auto res = conn.exec("SELECT (extract(epoch FROM pg_catalog.now()) * 1000000)::bigint");
  return std::stoll(PQgetvalue(res.get(), 0, 0));
}

std::optional<std::chrono::milliseconds> parse_show_duration(const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 12) return std::nullopt;
  const long long value = std::stoll(text.substr(0, digits));
  const std::string unit = text.substr(digits);
  if (unit.empty() || unit == "ms") return std::chrono::milliseconds(value);  // the GUC's base unit is ms
  if (unit == "s") return std::chrono::seconds(value);
  if (unit == "min") return std::chrono::minutes(value);
  if (unit == "h") return std::chrono::hours(value);
  if (unit == "d") return std::chrono::hours(24 * value);
  return std::nullopt;
}

void Connection::start_replication(const StartOptions& options) {
  {
    // A walsender accepts SHOW. Unreadable or unparsable: no client-side timeout rather than a
    // wrong one.
    PgResultPtr show(PQexec(conn_.get(), "SHOW wal_sender_timeout"));
    if (PQresultStatus(show.get()) == PGRES_TUPLES_OK && PQntuples(show.get()) == 1) {
      wal_sender_timeout_ = parse_show_duration(PQgetvalue(show.get(), 0, 0)).value_or(std::chrono::milliseconds(0));
    }
  }
  std::string pubs;
  for (const auto& p : options.publications) {
    if (!pubs.empty()) pubs += ",";
    pubs += identifier(p);  // publication names are identifiers: quoted keeps their case
  }
  const std::string sql =
      fmt::format("START_REPLICATION SLOT {} LOGICAL {} (proto_version '{}', publication_names {}, messages '{}')",
                  identifier(options.slot), options.start.to_string(), options.proto_version, literal(pubs),
                  options.messages ? "true" : "false");
  PgResultPtr res(PQexec(conn_.get(), sql.c_str()));
  if (PQresultStatus(res.get()) != PGRES_COPY_BOTH) {
    throw PgError(trim(PQerrorMessage(conn_.get())), fields_of(res.get(), conn_.get()));
  }
}

}  // namespace pgoutbox::replication
