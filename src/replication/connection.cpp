#include "pgoutbox/replication/connection.h"

#include <algorithm>

#include <fmt/format.h>

#include "pgoutbox/replication/connect_failure.h"
#include "pgoutbox/replication/server_features.h"

namespace pgoutbox::replication {
namespace {

std::string sqlstate_of(const PGresult* res) {
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  return state != nullptr ? state : "";
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
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
                            const std::string& password) {
  // Like libpqwalreceiver.c: the subscriber fixes encoding, date style, time zone and float
  // precision so that text values arrive in one known form. Later keywords override the DSN's.
  const char* keys[] = {"dbname", "replication", "application_name", "client_encoding", "options",
                        password.empty() ? nullptr : "password", nullptr};
  const char* values[] = {dsn.c_str(), replication ? "database" : "false", application_name.c_str(), "UTF8",
                          "-c datestyle=ISO -c intervalstyle=postgres -c extra_float_digits=3 -c TimeZone=UTC",
                          password.empty() ? nullptr : password.c_str(), nullptr};
  PGconn* raw = PQconnectdbParams(keys, values, 1);
  Connection conn(raw);
  if (raw == nullptr) throw PgError("out of memory creating a libpq connection", "");
  if (PQstatus(raw) != CONNECTION_OK) {
    const std::string message = trim(PQerrorMessage(raw));
    // A TLS failure carries its fix here: it has no SQLSTATE for a caller to classify by.
    const auto diagnosis = diagnose_connect_failure(message);
    const bool tls = diagnosis.kind == ConnectFailure::tls_untrusted ||
                     diagnosis.kind == ConnectFailure::tls_host_mismatch ||
                     diagnosis.kind == ConnectFailure::tls_client_cert;
    throw PgError(tls ? fmt::format("cannot connect to PostgreSQL: {}. Fix: {}", message, diagnosis.fix)
                      : fmt::format("cannot connect to PostgreSQL: {}", message),
                  "");
  }
  return conn;
}

int Connection::max_proto_version() const { return features_of(server_version()).proto_version; }

PgResultPtr Connection::exec(const std::string& sql) const {
  PgResultPtr res(PQexec(conn_.get(), sql.c_str()));
  const auto status = PQresultStatus(res.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK && status != PGRES_COPY_BOTH) {
    throw PgError(trim(PQerrorMessage(conn_.get())), sqlstate_of(res.get()));
  }
  return res;
}

std::string Connection::literal(const std::string& value) const {
  char* escaped = PQescapeLiteral(conn_.get(), value.data(), value.size());
  if (escaped == nullptr) throw PgError(trim(PQerrorMessage(conn_.get())), "");
  std::string out(escaped);
  PQfreemem(escaped);
  return out;
}

std::string Connection::identifier(const std::string& value) const {
  char* escaped = PQescapeIdentifier(conn_.get(), value.data(), value.size());
  if (escaped == nullptr) throw PgError(trim(PQerrorMessage(conn_.get())), "");
  std::string out(escaped);
  PQfreemem(escaped);
  return out;
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
  // Only the columns this major has: naming a later one fails the whole query (42703).
  const auto features = features_of(server_version());
  const std::string two_phase = features.slot_two_phase ? "two_phase" : "NULL::bool";
  const std::string failover = features.slot_failover ? "failover, synced, invalidation_reason"
                                                      : "NULL::bool, NULL::bool, NULL::text";
  auto res = exec("SELECT plugin, database, active, active_pid, confirmed_flush_lsn, restart_lsn, wal_status, " +
                  two_phase + ", " + failover + " FROM pg_catalog.pg_replication_slots WHERE slot_name = " +
                  literal(name));
  if (PQntuples(res.get()) == 0) return std::nullopt;
  const auto text = [&](int col) { return PQgetisnull(res.get(), 0, col) ? std::string() : PQgetvalue(res.get(), 0, col); };
  const auto flag = [&](int col) -> std::optional<bool> {
    if (PQgetisnull(res.get(), 0, col)) return std::nullopt;
    return text(col) == "t";
  };
  SlotState s;
  s.plugin = text(0);
  s.database = text(1);
  s.active = text(2) == "t";
  if (!PQgetisnull(res.get(), 0, 3)) s.active_pid = std::stoi(text(3));
  s.confirmed_flush = parse_lsn_or_zero(PQgetvalue(res.get(), 0, 4));
  s.restart_lsn = parse_lsn_or_zero(PQgetvalue(res.get(), 0, 5));
  s.wal_status = text(6);
  s.two_phase = flag(7);
  s.failover = flag(8);
  s.synced = flag(9);
  if (!PQgetisnull(res.get(), 0, 10)) s.invalidation_reason = text(10);
  return s;
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

std::optional<PublicationState> Connection::publication(const std::string& name) const {
  auto res = exec("SELECT puballtables, pubinsert, pubviaroot FROM pg_catalog.pg_publication WHERE pubname = " +
                  literal(name));
  if (PQntuples(res.get()) == 0) return std::nullopt;
  PublicationState p;
  p.all_tables = std::string(PQgetvalue(res.get(), 0, 0)) == "t";
  p.publishes_insert = std::string(PQgetvalue(res.get(), 0, 1)) == "t";
  p.via_root = std::string(PQgetvalue(res.get(), 0, 2)) == "t";
  auto tables = exec("SELECT schemaname, tablename FROM pg_catalog.pg_publication_tables WHERE pubname = " +
                     literal(name) + " ORDER BY 1, 2");
  for (int r = 0; r < PQntuples(tables.get()); ++r) {
    p.tables.push_back(TableName{PQgetvalue(tables.get(), r, 0), PQgetvalue(tables.get(), r, 1)});
  }
  return p;
}

bool Connection::is_partitioned(const TableName& table) const {
  auto res = exec(
      "SELECT c.relkind FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
      "WHERE n.nspname = " + literal(table.schema) + " AND c.relname = " + literal(table.name));
  if (PQntuples(res.get()) == 0) {
    throw PgError(fmt::format("table {}.{} does not exist", table.schema, table.name), "42P01");
  }
  return std::string(PQgetvalue(res.get(), 0, 0)) == "p";
}

void Connection::create_publication(const std::string& name, const std::vector<TableName>& tables) const {
  std::string list;
  bool any_partitioned = false;
  for (const auto& t : tables) {
    if (!list.empty()) list += ", ";
    list += t.quoted();
    any_partitioned = any_partitioned || is_partitioned(t);
  }
  // Inserts only: cleanup deletes of the outbox are neither blocked nor sent (PGOUTPUT.md §4.5).
  // Partitioned outboxes publish through their root, so rows arrive under the root's relid.
  std::string sql = "CREATE PUBLICATION " + identifier(name) + " FOR TABLE " + list + " WITH (publish = 'insert'";
  if (any_partitioned) sql += ", publish_via_partition_root = true";
  sql += ")";
  exec(sql);
}

void check_publication_covers(const Connection& conn, const std::string& publication,
                              const std::vector<TableName>& tables) {
  const auto pub = conn.publication(publication);
  if (!pub) {
    throw PgError(fmt::format("publication \"{}\" does not exist: create it (CREATE PUBLICATION {} FOR TABLE … "
                              "WITH (publish = 'insert')) or enable publication creation",
                              publication, publication),
                  "42704");
  }
  if (!pub->publishes_insert) {
    throw PgError(fmt::format("publication \"{}\" does not publish inserts: ALTER PUBLICATION {} SET (publish = 'insert')",
                              publication, publication),
                  "");
  }
  if (pub->all_tables) return;
  for (const auto& table : tables) {
    const bool listed = std::find(pub->tables.begin(), pub->tables.end(), table) != pub->tables.end();
    if (listed) continue;
    // A partitioned table published without via_root lists its leaves, not itself.
    if (!pub->via_root && conn.is_partitioned(table)) {
      throw PgError(fmt::format("publication \"{}\" covers partitioned table {}.{} without publish_via_partition_root: "
                                "ALTER PUBLICATION {} SET (publish_via_partition_root = true)",
                                publication, table.schema, table.name, publication),
                    "42704");
    }
    throw PgError(fmt::format("publication \"{}\" does not include table {}.{}: ALTER PUBLICATION {} ADD TABLE {}",
                              publication, table.schema, table.name, publication, table.quoted()),
                  "42704");
  }
}

void Connection::start_replication(const StartOptions& options) const {
  std::string pubs;
  for (const auto& p : options.publications) {
    if (!pubs.empty()) pubs += ",";
    pubs += identifier(p);  // publication names are identifiers: quoted keeps their case
  }
  const std::string sql = fmt::format(
      "START_REPLICATION SLOT {} LOGICAL {} (proto_version '{}', publication_names {}, messages '{}')",
      identifier(options.slot), options.start.to_string(), options.proto_version, literal(pubs),
      options.messages ? "true" : "false");
  PgResultPtr res(PQexec(conn_.get(), sql.c_str()));
  if (PQresultStatus(res.get()) != PGRES_COPY_BOTH) {
    throw PgError(trim(PQerrorMessage(conn_.get())), sqlstate_of(res.get()));
  }
}

}  // namespace pgoutbox::replication
