#include "pgoutbox/replication/catalog.h"

#include <fmt/format.h>

namespace pgoutbox::replication {
namespace {

// Whether publication `pub` (a quoted literal) publishes the rows of the relation whose OID
// the SQL expression `oid` gives: the relation itself or one of its partition ancestors is
// listed, or (15 and later) the schema of one of them is (FOR TABLES IN SCHEMA). Inheritance
// parents do not count: a child is published only when it is listed itself, and one created
// after CREATE PUBLICATION never is.
std::string published_sql(const std::string& oid, const std::string& pub, bool schemas) {
  std::string sql = fmt::format(
      "EXISTS (SELECT 1 FROM (SELECT ({0})::oid AS relid UNION SELECT relid FROM "
      "pg_catalog.pg_partition_ancestors({0})) a JOIN pg_catalog.pg_class ac ON ac.oid = a.relid WHERE "
      "EXISTS (SELECT 1 FROM pg_catalog.pg_publication_rel pr JOIN pg_catalog.pg_publication p ON p.oid = pr.prpubid "
      "WHERE p.pubname = {1} AND pr.prrelid = a.relid)",
      oid, pub);
  if (schemas) {
    sql += fmt::format(
        " OR EXISTS (SELECT 1 FROM pg_catalog.pg_publication_namespace pn JOIN pg_catalog.pg_publication p ON "
        "p.oid = pn.pnpubid WHERE p.pubname = {} AND pn.pnnspid = ac.relnamespace)",
        pub);
  }
  return sql + ")";
}

}  // namespace

Catalog::Catalog(std::string dsn, std::string application_name, std::string password, std::string publication)
    : dsn_(std::move(dsn)),
      application_name_(std::move(application_name)),
      password_(std::move(password)),
      publication_(std::move(publication)) {}

std::optional<std::vector<std::pair<std::string, std::string>>> Catalog::ancestors(std::uint32_t relid) {
  try {
    return query(relid);
  } catch (const PgError&) {
    // The connection may have died since the last look-up (server restart): reopen once.
    conn_.reset();
    return query(relid);
  }
}

Connection& Catalog::connection() {
  if (!conn_) conn_.emplace(Connection::open(dsn_, false, application_name_ + "-catalog", password_));
  return *conn_;
}

std::vector<std::string> Catalog::not_null_columns(std::uint32_t relid) {
  const auto read = [&] {
    auto res =
        connection().exec("SELECT attname FROM pg_catalog.pg_attribute WHERE attrelid = " + std::to_string(relid) +
                          " AND attnum > 0 AND NOT attisdropped AND attnotnull ORDER BY attnum");
    std::vector<std::string> out;
    out.reserve(static_cast<std::size_t>(PQntuples(res.get())));
    for (int r = 0; r < PQntuples(res.get()); ++r) out.emplace_back(PQgetvalue(res.get(), r, 0));
    return out;
  };
  try {
    return read();
  } catch (const PgError&) {
    conn_.reset();  // as in ancestors(): reopen once
    return read();
  }
}

std::optional<std::vector<std::pair<std::string, std::string>>> Catalog::query(std::uint32_t relid) {
  connection();
  const std::string oid = std::to_string(relid);
  auto exists = conn_->exec("SELECT count(*) FROM pg_catalog.pg_class WHERE oid = " + oid);
  if (std::string(PQgetvalue(exists.get(), 0, 0)) == "0") return std::nullopt;
  if (!publication_.empty()) {
    const std::string pub = conn_->literal(publication_);
    auto all = conn_->exec("SELECT puballtables FROM pg_catalog.pg_publication WHERE pubname = " + pub);
    const bool all_tables = PQntuples(all.get()) == 1 && std::string(PQgetvalue(all.get(), 0, 0)) == "t";
    if (PQntuples(all.get()) == 1 && !all_tables) {
      auto published = conn_->exec("SELECT " + published_sql(oid, pub, conn_->server_version() >= 150000));
      if (std::string(PQgetvalue(published.get(), 0, 0)) != "t") return std::nullopt;
    }
  }
  // Depth-bounded: pg_inherits cannot hold a cycle, but a catalog read must not loop on one.
  auto res = conn_->exec(
      "WITH RECURSIVE up(relid, depth) AS (SELECT i.inhparent, 1 FROM pg_catalog.pg_inherits i WHERE i.inhrelid = " +
      oid +
      " UNION ALL SELECT i.inhparent, up.depth + 1 FROM pg_catalog.pg_inherits i JOIN up ON i.inhrelid = up.relid "
      "WHERE up.depth < 64) "
      "SELECT n.nspname, c.relname, min(up.depth) FROM up JOIN pg_catalog.pg_class c ON c.oid = up.relid "
      "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace GROUP BY 1, 2 ORDER BY 3, 1, 2");
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(static_cast<std::size_t>(PQntuples(res.get())));
  for (int r = 0; r < PQntuples(res.get()); ++r)
    out.emplace_back(PQgetvalue(res.get(), r, 0), PQgetvalue(res.get(), r, 1));
  return out;
}

TableLayout describe_layout(const Connection& conn, const std::string& publication, const PublicationState& pub,
                            const TableName& table) {
  TableLayout layout;
  auto self = conn.exec(
      "SELECT c.oid, c.relkind FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
      "WHERE n.nspname = " +
      conn.literal(table.schema) + " AND c.relname = " + conn.literal(table.name));
  if (PQntuples(self.get()) == 0) return layout;
  layout.exists = true;
  const std::string oid = PQgetvalue(self.get(), 0, 0);
  layout.partitioned = std::string(PQgetvalue(self.get(), 0, 1)) == "p";
  const std::string pub_literal = conn.literal(publication);
  const bool schemas = conn.server_version() >= 150000;
  if (pub.all_tables) {
    layout.published = true;
  } else {
    auto res = conn.exec("SELECT " + published_sql(oid, pub_literal, schemas));
    layout.published = std::string(PQgetvalue(res.get(), 0, 0)) == "t";
  }
  auto down = conn.exec(
      "WITH RECURSIVE down(relid, depth) AS (SELECT i.inhrelid, 1 FROM pg_catalog.pg_inherits i WHERE i.inhparent = " +
      oid +
      " UNION ALL SELECT i.inhrelid, down.depth + 1 FROM pg_catalog.pg_inherits i JOIN down ON i.inhparent = "
      "down.relid WHERE down.depth < 64) "
      "SELECT DISTINCT n.nspname, c.relname, c.relispartition, c.relkind, " +
      (pub.all_tables ? std::string("true") : published_sql("c.oid", pub_literal, schemas)) +
      " FROM down JOIN pg_catalog.pg_class c ON c.oid = down.relid "
      "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace ORDER BY 1, 2");
  for (int r = 0; r < PQntuples(down.get()); ++r) {
    const TableName name{PQgetvalue(down.get(), r, 0), PQgetvalue(down.get(), r, 1)};
    const bool partition = std::string(PQgetvalue(down.get(), r, 2)) == "t";
    if (partition) {
      if (std::string(PQgetvalue(down.get(), r, 3)) != "p") ++layout.leaf_partitions;
      continue;  // a partition is published with its root, at any level
    }
    layout.children.push_back(name);
    if (std::string(PQgetvalue(down.get(), r, 4)) != "t") layout.unpublished.push_back(name);
  }
  return layout;
}

std::string describe_relaying(const std::string& publication, const PublicationState& pub, const TableName& table,
                              const TableLayout& layout) {
  const std::string label = table.schema + "." + table.name;
  std::string text = fmt::format("is in {}publication {}", pub.all_tables ? "FOR ALL TABLES " : "", publication);
  if (layout.partitioned) {
    text += pub.via_root ? fmt::format(
                               ", partitioned ({} leaf partition(s)), published under the root "
                               "(publish_via_partition_root) and mapped with the table's mapping",
                               layout.leaf_partitions)
                         : fmt::format(
                               ", partitioned ({} leaf partition(s)), published under each leaf partition's name (no "
                               "publish_via_partition_root): pgoutbox resolves each partition, also ones created "
                               "later, to {} by ancestry and maps it by column name",
                               layout.leaf_partitions, label);
  }
  if (!layout.children.empty()) {
    std::string names;
    for (const auto& c : layout.children) names += (names.empty() ? "" : ", ") + c.schema + "." + c.name;
    text += fmt::format("; inheritance children {} arrive under their own names and are mapped to {} by ancestry",
                        names, label);
  }
  return text;
}

}  // namespace pgoutbox::replication
