#pragma once

// What the catalog says about an outbox table's family, read on an ordinary SQL connection
// (never the walsender's): the ancestors of a relation the stream names, and how the
// publication reaches a configured table, its partitions and its inheritance children.
//
// pgoutput names the relation a row was written to: a leaf partition when the publication
// lacks publish_via_partition_root (or is FOR ALL TABLES), an inheritance child when the
// publication was created without ONLY (docs/pgoutput.md). Partitions are rows of pg_inherits
// like inheritance children, so one recursive walk over pg_inherits finds both kinds of
// ancestor, sub-partitions included (pg_partition_ancestors walks the same rows).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pgoutbox/replication/connection.h"

namespace pgoutbox::replication {

// Ancestor look-ups on a lazily opened SQL connection with pgoutbox's pinned session settings.
class Catalog {
 public:
  Catalog(std::string dsn, std::string application_name, std::string password, std::string publication);

  // The relation's ancestors through partitioning and inheritance, nearest first, each once,
  // as (schema, name). nullopt when the catalog as it is now cannot say whose family the
  // relation was in when its change was written: no relation has this OID any more (dropped
  // since), or the publication is not FOR ALL TABLES and no longer publishes it (detached from
  // its root, NO INHERIT, or taken out of the publication since: the stream carried it, so it
  // was published then). Throws PgError when the catalog cannot be read (the connection is
  // reopened once).
  std::optional<std::vector<std::pair<std::string, std::string>>> ancestors(std::uint32_t relid);

  // The names of the relation's NOT NULL columns now (a dropped relation has none). Throws
  // PgError as ancestors() does.
  std::vector<std::string> not_null_columns(std::uint32_t relid);

 private:
  Connection& connection();
  std::optional<std::vector<std::pair<std::string, std::string>>> query(std::uint32_t relid);

  std::string dsn_;
  std::string application_name_;
  std::string password_;
  std::string publication_;
  std::optional<Connection> conn_;
};

// How a publication reaches one configured outbox table.
struct TableLayout {
  bool exists = false;
  bool partitioned = false;            // relkind 'p'
  bool published = false;              // the publication publishes the table's own rows
  std::size_t leaf_partitions = 0;     // every level of sub-partitions
  std::vector<TableName> children;     // inheritance children, every level
  std::vector<TableName> unpublished;  // of those, the ones the publication leaves out
};

// Reads the layout; `pub` is the publication's state (Connection::publication).
TableLayout describe_layout(const Connection& conn, const std::string& publication, const PublicationState& pub,
                            const TableName& table);

// One sentence: the layout and what pgoutbox does with it (for logs and `check`).
std::string describe_relaying(const std::string& publication, const PublicationState& pub, const TableName& table,
                              const TableLayout& layout);

}  // namespace pgoutbox::replication
