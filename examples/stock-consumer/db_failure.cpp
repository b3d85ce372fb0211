#include "db_failure.h"

#include <string_view>

namespace shop {

DbFailure classify(const PgError& error) {
  if (error.connection_lost()) return DbFailure::transient;
  const std::string_view state = error.sqlstate();
  // SQLSTATE classes and codes: PostgreSQL documentation, Appendix A.
  if (state.starts_with("08")) return DbFailure::transient;               // connection exception
  if (state == "40001" || state == "40P01") return DbFailure::transient;  // serialization failure, deadlock
  if (state.starts_with("53")) return DbFailure::transient;  // insufficient resources (too many connections)
  if (state == "55P03") return DbFailure::transient;         // lock not available
  if (state == "57P01" || state == "57P02" || state == "57P03") return DbFailure::transient;  // shutdown, starting up
  return DbFailure::fatal;
}

}  // namespace shop
