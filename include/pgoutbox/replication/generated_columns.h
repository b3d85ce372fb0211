#pragma once

// Generated columns and logical replication (PostgreSQL docs, "Logical Replication — Generated
// Column Replication"): before 18 pgoutput never sends a generated column. 18 sends a STORED one
// when the publication has publish_generated_columns = stored, or names it in a column list; a
// VIRTUAL one (18's default kind) never. An outbox column the mapping reads must therefore be an
// ordinary column, or a stored one the publication sends.

#include <string>
#include <vector>

#include "pgoutbox/replication/connection.h"

namespace pgoutbox::replication {

struct GeneratedColumn {
  std::string name;
  bool stored = false;     // attgenerated 's'; otherwise 'v', virtual (18)
  bool published = false;  // the existing publication sends it (18 only; false when it does not exist)
};

// Which of `columns` are generated columns of `table`, in the table's order.
std::vector<GeneratedColumn> generated_columns(const Connection& conn, const TableName& table,
                                               const std::string& publication, const std::vector<std::string>& columns);

// The columns a configured table's mapping reads.
struct MappedColumns {
  TableName table;
  std::vector<std::string> columns;
};

// Whether a publication pgoutbox creates for these tables needs publish_generated_columns =
// stored: the server is 18 or later and one of the mapped columns is a stored generated column.
bool needs_stored_generated_columns(const Connection& conn, const std::string& publication,
                                    const std::vector<MappedColumns>& tables);

}  // namespace pgoutbox::replication
