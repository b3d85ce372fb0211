#pragma once

#include "pg.h"

namespace shop {

// What a failed database step means for the record in hand (seeds: 错误分类).
//  transient: the connection dropped, the server is restarting, a serialization failure or a
//             deadlock. The transaction rolled back; the same step can succeed later, so retry
//             it with backoff.
//  fatal:     anything else (a missing table, no rights, a bug). Retrying cannot help and
//             skipping would lose the event: stop without committing the offset, an operator
//             must act.
// Business errors (insufficient stock) and malformed records are not database failures; they
// are decided from the data itself (StockStore's outcome, parse_stock_event).
enum class DbFailure { transient, fatal };

DbFailure classify(const PgError& error);

}  // namespace shop
