#pragma once

// The causes of a Postgres failure that SQLSTATE alone does not give (docs/style.md §7), asked
// after it: why a connection could not be opened, which reaches libpq's caller with no SQLSTATE
// (libpq's status first, PQconnectionNeedsPassword, then its message: the server's FATAL for
// 28000, 28P01, 42501, or libpq's TLS failure), and what the SQLSTATEs that cover several causes
// (55000, 42704) say. The message fragments are in one table (failure_cause.cpp), tested by
// tests/replication/failure_cause_test.cpp.

#include <string_view>

namespace pgoutbox::replication {

enum class FailureCause {
  none,               // nothing the table knows: refused, unreachable, starting up, … (transient)
  tls_untrusted,      // the server's certificate does not chain to sslrootcert (or there is no root certificate)
  tls_host_mismatch,  // verify-full: the certificate does not name the host connected to
  tls_client_cert,    // the server wants a client certificate, or refused the one given
  no_hba_entry,       // pg_hba.conf has no line for this host, user, database (and SSL state): 28000
  authentication,     // no or a wrong password (28P01), or a role that may not log in
  permission,         // the role may not replicate or connect to the database (42501 at connect)
  wal_level,          // 55000: logical decoding needs wal_level = logical
  slot_invalidated,   // 55000: the slot can no longer get changes
  publication,        // 55000, 42704: the publication is missing or unusable
  slot_unusable,      // 55000, 42704: anything else those say of the slot (missing, other database)
};

// Only the table: `sqlstate` empty for libpq's own failures (a connection attempt, a lost
// connection).
FailureCause cause_of_text(std::string_view sqlstate, std::string_view message);
// Why a connection could not be opened: `needs_password` is PQconnectionNeedsPassword() of the
// failed connection, `libpq_message` its PQerrorMessage().
FailureCause connect_failure_of(bool needs_password, std::string_view libpq_message);
// What the operator changes when a connection cannot be opened for `cause`; empty when retrying
// is all there is to do (none) or the cause is not one of a connection start.
std::string_view connect_fix(FailureCause cause);

}  // namespace pgoutbox::replication
