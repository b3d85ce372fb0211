#pragma once

// What a Postgres failure means for the session (docs/style.md §7: classify once, at the edge).
// Structure decides: why Connection::open could not connect (libpq's status first), else the
// server's SQLSTATE; the message text is read last, from the one table of
// replication/failure_cause.h, for the SQLSTATEs that cover several causes (55000, 42704) and
// libpq's own failures.

#include "pgoutbox/relay/outcome.h"
#include "pgoutbox/replication/connection.h"

namespace pgoutbox::relay {

struct SessionContext {
  int server_version = 0;      // 0: not connected yet
  bool ever_streamed = false;  // an earlier session of this process streamed
};

// The outcome, with the fix for what the operator must act on. Authentication and TLS
// failures are fatal only while the process never streamed: after that they may come from a
// failover in progress, and are retried.
Outcome classify(const replication::PgError& error, const SessionContext& context);

}  // namespace pgoutbox::relay
