// The outbox tables and the publication (the seeds' "is the table in the publication, can the
// role read it, are the columns there" steps). Columns are judged by the relay's own mapping
// (outbox::ResolvedTable) applied to the catalog's description of the table, so `check` and
// `run` cannot disagree about which columns and types are usable.
#include <algorithm>
#include <memory>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "checks.h"
#include "pgoutbox/diagnostics/preflight.h"
#include "pgoutbox/diagnostics/slot_status.h"
#include "pgoutbox/outbox/mapping.h"
#include "pgoutbox/pgoutput/relation_cache.h"
#include "pgoutbox/replication/catalog.h"
#include "pgoutbox/replication/generated_columns.h"
#include "pgoutbox/replication/server_features.h"
#include "pgoutbox/replication/slot.h"

namespace pgoutbox::diagnostics::detail {

std::string table_label(const config::TableConfig& table) { return table.schema + "." + table.name; }

namespace {

struct Publication {
  bool all_tables = false;
  bool insert = false;
  bool update = false;
  bool remove = false;  // pubdelete
  bool via_root = false;
};

struct TableFacts {
  std::string oid;
  char relkind = 'r';
  bool can_select = false;
  bool owned = false;         // the role is (a member of) the owner: it may add it to a publication
  bool has_identity = false;  // deletes may be published (a primary key, or REPLICA IDENTITY FULL/INDEX)
};

replication::TableName name_of(const config::TableConfig& t) { return {t.schema, t.name}; }

std::vector<replication::TableName> table_names(const config::Config& config) {
  std::vector<replication::TableName> out;
  for (const auto& t : config.tables) out.push_back(name_of(t));
  return out;
}

std::optional<TableFacts> table_facts(const replication::Connection& conn, const config::TableConfig& t) {
  const auto row =
      first_row(conn,
                "SELECT c.oid, c.relkind, pg_catalog.has_table_privilege(c.oid, 'SELECT'), "
                "pg_catalog.pg_has_role(c.relowner, 'USAGE'), "
                "c.relreplident IN ('f', 'i') OR (c.relreplident = 'd' AND EXISTS (SELECT 1 FROM pg_catalog.pg_index i "
                "WHERE i.indrelid = c.oid AND i.indisprimary)) "
                "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = " +
                    conn.literal(t.schema) + " AND c.relname = " + conn.literal(t.name));
  if (row.empty()) return std::nullopt;
  return TableFacts{row.at(0), row.at(1).empty() ? '?' : row.at(1)[0], row.at(2) == "t", row.at(3) == "t",
                    row.at(4) == "t"};
}

std::optional<Publication> publication_of(const replication::Connection& conn, const std::string& name) {
  const auto row = first_row(conn,
                             "SELECT puballtables, pubinsert, pubupdate, pubdelete, pubviaroot FROM "
                             "pg_catalog.pg_publication WHERE pubname = " +
                                 conn.literal(name));
  if (row.empty()) return std::nullopt;
  return Publication{row.at(0) == "t", row.at(1) == "t", row.at(2) == "t", row.at(3) == "t", row.at(4) == "t"};
}

// The columns the publication sends for the table (a PG15 column list may leave some out);
// nullopt when the publication does not list the table itself.
std::optional<std::vector<std::string>> published_columns(const replication::Connection& conn,
                                                          const std::string& publication,
                                                          const replication::TableName& t) {
  const std::string where = " FROM pg_catalog.pg_publication_tables WHERE pubname = " + conn.literal(publication) +
                            " AND schemaname = " + conn.literal(t.schema) + " AND tablename = " + conn.literal(t.name);
  if (first_row(conn, "SELECT count(*)" + where).at(0) == "0") return std::nullopt;
  std::vector<std::string> names;
  if (conn.server_version() < 150000) return names;  // no column lists before 15: every column
  auto res = conn.exec("SELECT unnest(attnames)" + where);
  for (int r = 0; r < PQntuples(res.get()); ++r) names.emplace_back(PQgetvalue(res.get(), r, 0));
  return names;
}

// The table as a Relation message would describe it: live columns, restricted to a column list
// when there is one. Generated columns are never sent before 18; 18 sends a stored one that the
// publication's column list (pg_publication_tables.attnames) holds, or, without a publication
// yet, that pgoutbox creates it to send (generated_columns.h).
pgoutput::Relation relation_of(const replication::Connection& conn, const replication::TableName& t,
                               const std::string& oid, const std::vector<std::string>& column_list,
                               std::string& described) {
  const bool stored_sent = replication::features_of(conn.server_version()).publish_generated_columns;
  auto res = conn.exec(
      "SELECT attname, atttypid, atttypmod, pg_catalog.format_type(atttypid, atttypmod) FROM pg_catalog.pg_attribute "
      "WHERE attrelid = " +
      oid + " AND attnum > 0 AND NOT attisdropped AND (attgenerated = ''" +
      (stored_sent ? " OR attgenerated = 's'" : "") + ") ORDER BY attnum");
  pgoutput::Relation rel;
  rel.relid = static_cast<pgoutput::Oid>(std::stoul(oid));
  rel.nspname = t.schema;
  rel.relname = t.name;
  rel.generation = 1;
  for (int r = 0; r < PQntuples(res.get()); ++r) {
    const std::string name = PQgetvalue(res.get(), r, 0);
    if (!column_list.empty() && std::find(column_list.begin(), column_list.end(), name) == column_list.end()) continue;
    rel.columns.push_back({name, static_cast<pgoutput::Oid>(std::stoul(PQgetvalue(res.get(), r, 1))),
                           static_cast<std::int32_t>(std::stol(PQgetvalue(res.get(), r, 2))), false});
    described += fmt::format("{}{} {}", described.empty() ? "" : ", ", name, PQgetvalue(res.get(), r, 3));
  }
  return rel;
}

// The columns each configured table's mapping reads (replication/generated_columns.h).
std::vector<replication::MappedColumns> mapped_tables(const config::Config& config) {
  std::vector<replication::MappedColumns> out;
  for (const auto& t : config.tables) {
    replication::MappedColumns m{name_of(t), {}};
    for (const auto& c : outbox::mapped_columns(t)) m.columns.push_back(c.column);
    out.push_back(std::move(m));
  }
  return out;
}

void check_publication(CheckContext& ctx, const std::optional<Publication>& pub) {
  const auto& pg = ctx.config.postgres;
  const std::string subject = "publication " + pg.publication;
  if (!pub) {
    std::string list;
    for (const auto& t : ctx.config.tables) list += (list.empty() ? "" : ", ") + name_of(t).quoted();
    const bool generated =
        replication::needs_stored_generated_columns(ctx.conn, pg.publication, mapped_tables(ctx.config));
    // A message outbox alone needs a publication all the same, with no table.
    const std::string create =
        fmt::format("CREATE PUBLICATION {}{} WITH (publish = 'insert'{})", ctx.conn.identifier(pg.publication),
                    list.empty() ? "" : " FOR TABLE " + list, generated ? ", publish_generated_columns = stored" : "");
    if (!pg.create_publication) {
      ctx.findings.push_back(Finding::blocking(
          subject, "does not exist.",
          fmt::format("as the tables' owner: {}; (add publish_via_partition_root = true for a partitioned outbox; "
                      "sql/publication.sql), or set postgres.create_publication: true.",
                      create)));
      return;
    }
    if (ctx.conn.slot(pg.slot)) {
      // `run` refuses to create it (replication/slot.h), with the statement it would have run;
      // a missing table (its own finding) leaves the plain statement.
      const auto statement = [&] {
        try {
          return ctx.conn.create_publication_sql(pg.publication, table_names(ctx.config), generated);
        } catch (const replication::PgError&) {
          return std::string(create);
        }
      }();
      const auto refusal = replication::refuse_publication_after_slot(pg.slot, statement);
      ctx.findings.push_back(Finding::blocking(subject, refusal.message + ".", refusal.fix + "."));
      return;
    }
    const bool may_create =
        first_row(ctx.conn, "SELECT pg_catalog.has_database_privilege(current_database(), 'CREATE')").at(0) == "t";
    if (!may_create) {
      ctx.findings.push_back(
          Finding::blocking(subject,
                            fmt::format("does not exist, and role {} may not create it (no CREATE on database {}).",
                                        ctx.user, ctx.database),
                            fmt::format("create it as the tables' owner: {};", create)));
      return;
    }
    ctx.findings.push_back(Finding::ok(subject,
                                       "does not exist yet; pgoutbox creates it at start "
                                       "(postgres.create_publication)"));
    return;
  }
  if (!pub->insert) {
    ctx.findings.push_back(Finding::blocking(
        subject, "does not publish inserts.",
        fmt::format("ALTER PUBLICATION {} SET (publish = 'insert');", ctx.conn.identifier(pg.publication))));
    return;
  }
  ctx.findings.push_back(
      Finding::ok(subject, fmt::format("exists and publishes inserts{}{}", pub->all_tables ? " of all tables" : "",
                                       pub->via_root ? ", via the partition root" : "")));
}

void check_coverage(CheckContext& ctx, const config::TableConfig& t, const TableFacts& facts,
                    const std::optional<Publication>& pub) {
  const auto& name = ctx.config.postgres.publication;
  const std::string subject = "table " + table_label(t);
  if (!pub) {
    if (ctx.config.postgres.create_publication && !facts.owned) {
      ctx.findings.push_back(Finding::blocking(
          subject, fmt::format("is not owned by role {}, so pgoutbox cannot create the publication with it.", ctx.user),
          "create the publication as the table's owner (sql/publication.sql)."));
    }
    return;
  }
  // The same layout reading as the relay's check at connect (replication/catalog.h): partitions
  // with or without publish_via_partition_root and inheritance children are relayed; a child
  // the publication leaves out is refused, its rows would never reach the stream.
  replication::PublicationState state;
  state.all_tables = pub->all_tables;
  state.publishes_insert = pub->insert;
  state.via_root = pub->via_root;
  const auto layout = replication::describe_layout(ctx.conn, name, state, name_of(t));
  if (!layout.published) {
    ctx.findings.push_back(Finding::blocking(
        subject, fmt::format("is not in publication {}.", name),
        fmt::format("ALTER PUBLICATION {} ADD TABLE {};", ctx.conn.identifier(name), name_of(t).quoted())));
  } else {
    ctx.findings.push_back(Finding::ok(subject, replication::describe_relaying(name, state, name_of(t), layout)));
  }
  for (const auto& child : layout.unpublished) {
    ctx.findings.push_back(Finding::blocking(
        subject,
        fmt::format("has inheritance child {}.{} that publication {} leaves out (created after the publication, or "
                    "excluded with ONLY): rows inserted there would never reach pgoutbox.",
                    child.schema, child.name, name),
        fmt::format("ALTER PUBLICATION {} ADD TABLE {};", ctx.conn.identifier(name), child.quoted())));
  }

  if ((pub->update || pub->remove) && !facts.has_identity) {
    ctx.findings.push_back(Finding::warning(
        subject,
        fmt::format("has no replica identity while publication {} publishes updates or deletes: the application's "
                    "DELETE of outbox rows (insert-then-delete, retention) fails.",
                    name),
        fmt::format("ALTER PUBLICATION {} SET (publish = 'insert');", ctx.conn.identifier(name))));
  }
}

// The partitions and inheritance children (every level) that publication lists under their own
// names, so their rows arrive under those names: leaf partitions without
// publish_via_partition_root, inheritance children. As (name, OID).
std::vector<std::pair<replication::TableName, std::string>> published_members(const replication::Connection& conn,
                                                                              const std::string& publication,
                                                                              const TableFacts& facts) {
  // Depth-bounded like the relay's own ancestry walk (replication/catalog.cpp).
  auto res = conn.exec(
      "WITH RECURSIVE down(relid, depth) AS (SELECT i.inhrelid, 1 FROM pg_catalog.pg_inherits i WHERE i.inhparent = " +
      facts.oid +
      " UNION ALL SELECT i.inhrelid, down.depth + 1 FROM pg_catalog.pg_inherits i JOIN down ON i.inhparent = "
      "down.relid WHERE down.depth < 64) "
      "SELECT DISTINCT n.nspname, c.relname, c.oid FROM down JOIN pg_catalog.pg_class c ON c.oid = down.relid "
      "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE EXISTS (SELECT 1 FROM "
      "pg_catalog.pg_publication_tables pt WHERE pt.pubname = " +
      conn.literal(publication) + " AND pt.schemaname = n.nspname AND pt.tablename = c.relname) ORDER BY 1, 2");
  std::vector<std::pair<replication::TableName, std::string>> out;
  out.reserve(static_cast<std::size_t>(PQntuples(res.get())));
  for (int r = 0; r < PQntuples(res.get()); ++r)
    out.push_back({{PQgetvalue(res.get(), r, 0), PQgetvalue(res.get(), r, 1)}, PQgetvalue(res.get(), r, 2)});
  return out;
}

// Each member whose rows arrive under its own name is mapped as `run` maps it when its first row
// comes (outbox::Mapping: by ancestry to the configured table, its columns resolved by name), so
// a member that would stop the relay with exit 17 mid-stream blocks here, in the relay's words.
void check_members(CheckContext& ctx, const config::TableConfig& t, const TableFacts& facts) {
  const auto& pg = ctx.config.postgres;
  const auto members = published_members(ctx.conn, pg.publication, facts);
  if (members.empty()) return;
  const auto catalog = std::make_shared<replication::Catalog>(pg.dsn, pg.application_name, pg.password, pg.publication);
  outbox::Mapping mapping(ctx.config.tables, ctx.config.provenance_headers,
                          [catalog](pgoutput::Oid relid) { return catalog->ancestors(relid); });
  const std::string subject = "table " + table_label(t);
  std::size_t served = 0;
  for (const auto& member : members) {
    const auto& name = member.first;
    const auto& oid = member.second;
    // A member that is itself a configured table is checked as one.
    if (std::any_of(ctx.config.tables.begin(), ctx.config.tables.end(),
                    [&](const config::TableConfig& c) { return c.schema == name.schema && c.name == name.name; }))
      continue;
    std::string described;
    const auto rel =
        relation_of(ctx.conn, name, oid,
                    published_columns(ctx.conn, pg.publication, name).value_or(std::vector<std::string>{}), described);
    try {
      if (mapping.resolve(rel) != nullptr) ++served;
    } catch (const outbox::MappingError& e) {
      // The relay's reason reads "…. Fix: …": the finding keeps both halves in its own places.
      constexpr std::string_view marker = ". Fix: ";
      const std::string what = e.what();
      const auto at = what.rfind(marker);
      const std::string fix = at == std::string::npos ? std::string() : what.substr(at + marker.size());
      ctx.findings.push_back(Finding::blocking(subject, fmt::format("{}. Columns: {}.", what.substr(0, at), described),
                                               fix.empty() ? fix : fix + "."));
    }
  }
  if (served > 0) {
    ctx.findings.push_back(Finding::ok(
        subject, fmt::format("the columns of the {} partition(s) or inheritance child(ren) published under their own "
                             "names serve the mapping",
                             served)));
  }
}

// A mapped column that is generated reaches pgoutbox only from 18 on, stored, and published
// (replication/generated_columns.h): otherwise the stream lacks it and the mapping cannot be
// served. True when a finding blocks.
bool check_generated(CheckContext& ctx, const config::TableConfig& t) {
  const auto& pg = ctx.config.postgres;
  const auto mapped = outbox::mapped_columns(t);
  std::vector<std::string> names;
  names.reserve(mapped.size());
  for (const auto& c : mapped) names.push_back(c.column);
  const auto generated = replication::generated_columns(ctx.conn, name_of(t), pg.publication, names);
  if (generated.empty()) return false;
  const std::string subject = "table " + table_label(t);
  const auto features = replication::features_of(ctx.conn.server_version());
  const bool pub_exists = ctx.conn.publication(pg.publication).has_value();
  const std::string pub_name = ctx.conn.identifier(pg.publication);
  bool blocked = false;
  for (const auto& g : generated) {
    std::string roles;
    for (const auto& c : mapped) {
      if (c.column == g.name) roles += (roles.empty() ? "the " : " and the ") + c.role;
    }
    const std::string column = fmt::format("column \"{}\" ({})", g.name, roles);
    if (!features.publish_generated_columns) {
      ctx.findings.push_back(Finding::blocking(
          subject,
          fmt::format("{} is a generated column, and PostgreSQL {} never publishes generated columns: the stream "
                      "would lack it.",
                      column, replication::version_text(features.server_version)),
          fmt::format("make \"{}\" an ordinary column that the application (or a BEFORE INSERT trigger) fills, or "
                      "upgrade to PostgreSQL 18 and publish it (publish_generated_columns = stored).",
                      g.name)));
    } else if (!g.stored) {
      ctx.findings.push_back(Finding::blocking(
          subject, fmt::format("{} is a virtual generated column, which logical replication never publishes.", column),
          fmt::format("make it STORED (ALTER TABLE {} DROP COLUMN {}, then ADD COLUMN … GENERATED ALWAYS AS (…) "
                      "STORED) and publish it with publish_generated_columns = stored, or make it an ordinary "
                      "column.",
                      name_of(t).quoted(), ctx.conn.identifier(g.name))));
    } else if (pub_exists && !g.published) {
      ctx.findings.push_back(Finding::blocking(
          subject,
          fmt::format("{} is a stored generated column that publication {} does not publish "
                      "(publish_generated_columns = none, or a column list without it): the stream would lack it.",
                      column, pg.publication),
          fmt::format("ALTER PUBLICATION {} SET (publish_generated_columns = stored); (or name the column in the "
                      "table's column list); rows committed before that reach pgoutbox without it.",
                      pub_name)));
    } else {
      ctx.findings.push_back(Finding::ok(
          subject, fmt::format("{} is a stored generated column, which {}", column,
                               pub_exists              ? "publication " + pg.publication + " publishes"
                               : pg.create_publication ? std::string("pgoutbox publishes (publish_generated_columns = "
                                                                     "stored) when it creates the publication")
                                                       : std::string("the CREATE PUBLICATION above publishes "
                                                                     "(publish_generated_columns = stored)"))));
      continue;
    }
    blocked = true;
  }
  return blocked;
}

void check_columns(CheckContext& ctx, std::size_t index, const config::TableConfig& t, const TableFacts& facts,
                   const std::vector<std::string>& column_list) {
  const std::string subject = "table " + table_label(t);
  // The generated column's own finding says why the mapping below would fail, and the fix.
  if (check_generated(ctx, t)) return;
  std::string described;
  const auto rel = relation_of(ctx.conn, name_of(t), facts.oid, column_list, described);
  try {
    const outbox::ResolvedTable resolved(t, rel, ctx.config.provenance_headers);
    ctx.findings.push_back(Finding::ok(subject, fmt::format("columns serve the mapping ({})", described)));
  } catch (const outbox::MappingError& e) {
    ctx.findings.push_back(Finding::blocking(
        subject, fmt::format("{}. Columns: {}.", e.what(), described),
        fmt::format("add or alter the column (ALTER TABLE {} …), or name the column that plays the role in "
                    "tables[{}].columns of the configuration; a publication column list must include it.",
                    name_of(t).quoted(), index)));
  }
}

void check_table(CheckContext& ctx, std::size_t index, const config::TableConfig& t,
                 const std::optional<Publication>& pub) {
  const std::string subject = "table " + table_label(t);
  const auto facts = table_facts(ctx.conn, t);
  if (!facts) {
    ctx.findings.push_back(Finding::blocking(
        subject, "does not exist.",
        fmt::format("create it (sql/outbox.sql) or correct tables[{}].table (names are case-sensitive when quoted).",
                    index)));
    return;
  }
  if (facts->relkind != 'r' && facts->relkind != 'p') {
    ctx.findings.push_back(Finding::blocking(subject, "is not a table (views and foreign tables are not published).",
                                             fmt::format("point tables[{}].table at the outbox table.", index)));
    return;
  }
  // Logical decoding reads the WAL, never the table, and the catalog is readable by every role:
  // `run` needs no SELECT on the outbox, so its absence blocks nothing (docs/security.md "Least-privilege
  // role").
  ctx.findings.push_back(
      Finding::ok(subject, fmt::format("role {} {}", ctx.user,
                                       facts->can_select ? "may SELECT it (pgoutbox does not need that right)"
                                                         : "has no SELECT on it, which pgoutbox does not need")));
  std::optional<std::vector<std::string>> columns;
  if (pub) columns = published_columns(ctx.conn, ctx.config.postgres.publication, name_of(t));
  check_coverage(ctx, t, *facts, pub);
  check_columns(ctx, index, t, *facts, columns.value_or(std::vector<std::string>{}));
  if (pub) check_members(ctx, t, *facts);
}

}  // namespace

void check_tables(CheckContext& ctx) {
  std::optional<Publication> pub;
  try {
    pub = publication_of(ctx.conn, ctx.config.postgres.publication);
    check_publication(ctx, pub);
  } catch (const replication::PgError& e) {
    ctx.findings.push_back(Finding::blocking("publication " + ctx.config.postgres.publication,
                                             fmt::format("cannot be read: {}.", e.what()),
                                             "check that pg_catalog.pg_publication is readable."));
    return;
  }
  for (std::size_t i = 0; i < ctx.config.tables.size(); ++i) {
    const auto& t = ctx.config.tables[i];
    try {
      check_table(ctx, i, t, pub);
    } catch (const replication::PgError& e) {
      ctx.findings.push_back(Finding::blocking("table " + table_label(t),
                                               fmt::format("cannot be inspected: {}.", e.what()),
                                               "check the role's access to the catalog and the table."));
    }
  }
}

}  // namespace pgoutbox::diagnostics::detail

namespace pgoutbox::diagnostics {

std::vector<Finding> check_mappings(const config::Config& config) {
  const auto conn = connect_ordinary(config, "mapping");
  std::vector<Finding> findings;
  detail::CheckContext ctx{config, conn, {}, {}, findings};
  for (std::size_t i = 0; i < config.tables.size(); ++i) {
    const auto& t = config.tables[i];
    const auto facts = detail::table_facts(conn, t);
    if (!facts || (facts->relkind != 'r' && facts->relkind != 'p')) continue;
    const auto columns = detail::published_columns(conn, config.postgres.publication, detail::name_of(t));
    detail::check_columns(ctx, i, t, *facts, columns.value_or(std::vector<std::string>{}));
    detail::check_members(ctx, t, *facts);
  }
  std::erase_if(findings, [](const Finding& f) { return f.severity != Severity::blocking; });
  return findings;
}

}  // namespace pgoutbox::diagnostics
