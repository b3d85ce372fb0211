#include "pgoutbox/replication/generated_columns.h"

#include <algorithm>

#include <fmt/format.h>

#include "pgoutbox/replication/server_features.h"

namespace pgoutbox::replication {

std::vector<GeneratedColumn> generated_columns(const Connection& conn, const TableName& table,
                                               const std::string& publication,
                                               const std::vector<std::string>& columns) {
  const bool publishable = features_of(conn.server_version()).publish_generated_columns;
  const std::string pub = conn.literal(publication);
  // pg_publication_tables.attnames is what 18 sends for a table the publication lists (stored
  // generated columns included when pubgencols = 's' or a column list names them). A partitioned
  // table published through its leaves is not listed itself: then the option decides.
  const std::string published =
      publishable ? fmt::format(
                        "COALESCE((SELECT a.attgenerated = 's' AND a.attname = ANY (pt.attnames) FROM "
                        "pg_catalog.pg_publication_tables pt WHERE pt.pubname = {0} AND pt.schemaname = n.nspname "
                        "AND pt.tablename = c.relname), (SELECT a.attgenerated = 's' AND p.pubgencols = 's' FROM "
                        "pg_catalog.pg_publication p WHERE p.pubname = {0}), false)",
                        pub)
                  : std::string("false");
  auto res = conn.exec(fmt::format(
      "SELECT a.attname, a.attgenerated = 's', {} FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON "
      "c.oid = a.attrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = {} AND "
      "c.relname = {} AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated <> '' ORDER BY a.attnum",
      published, conn.literal(table.schema), conn.literal(table.name)));
  std::vector<GeneratedColumn> out;
  for (int r = 0; r < PQntuples(res.get()); ++r) {
    std::string name = PQgetvalue(res.get(), r, 0);
    if (std::find(columns.begin(), columns.end(), name) == columns.end()) continue;
    out.push_back({std::move(name), std::string(PQgetvalue(res.get(), r, 1)) == "t",
                   std::string(PQgetvalue(res.get(), r, 2)) == "t"});
  }
  return out;
}

bool needs_stored_generated_columns(const Connection& conn, const std::string& publication,
                                    const std::vector<MappedColumns>& tables) {
  if (!features_of(conn.server_version()).publish_generated_columns) return false;
  return std::any_of(tables.begin(), tables.end(), [&](const MappedColumns& t) {
    const auto generated = generated_columns(conn, t.table, publication, t.columns);
    return std::any_of(generated.begin(), generated.end(), [](const GeneratedColumn& c) { return c.stored; });
  });
}

}  // namespace pgoutbox::replication
