#pragma once

// What a Postgres failure means for the session (docs/style.md §7: classify once, at the edge).
// The server's SQLSTATE decides; libpq's own failures (no SQLSTATE: connecting, TLS, a lost
// connection) and the few SQLSTATEs that cover several causes are told apart by message text,
// in one table (pg_failure.cpp) with its own test.

#include <string_view>

#include "pgoutbox/relay/outcome.h"
#include "pgoutbox/replication/connection.h"

namespace pgoutbox::relay {

enum class PgCause {
  transient,            // connection refused or lost, server starting up (57P03), too many connections (53300)
  standby,              // the slot is active in another session (55006)
  authentication,       // no password (libpq), pg_hba.conf reject (28000), bad password (28P01)
  tls,                  // the server's certificate failed verification
  permission,           // 42501
  wal_level,            // logical decoding needs wal_level = logical
  table_missing,        // 42P01
  slot_invalidated,     // the slot can no longer get changes
  slot_unusable,        // missing, or another plugin or database
  slot_limit,           // max_replication_slots reached (53400)
  publication,          // missing, or does not cover the tables
  server_version,       // the server does not understand a command pgoutbox sends (42601)
  unsupported_feature,  // 0A000: a server too old for pgoutbox (13 and older) or for an option (failover slots)
};

// By SQLSTATE, then libpq's message text.
PgCause cause_of(const replication::PgError& error);
// Only the text table: the cause a message names, transient when it names none.
PgCause cause_of_text(std::string_view sqlstate, std::string_view message);

struct SessionContext {
  int server_version = 0;      // 0: not connected yet
  bool ever_streamed = false;  // an earlier session of this process streamed
};

// The outcome, with the fix for what the operator must act on. Authentication and TLS
// failures are fatal only while the process never streamed: after that they may come from a
// failover in progress, and are retried.
Outcome classify(const replication::PgError& error, const SessionContext& context);

}  // namespace pgoutbox::relay
