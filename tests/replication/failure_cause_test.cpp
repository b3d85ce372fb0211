// The one table of message fragments (failure_cause.h): each row's cause from the texts
// libpq and the server really write, the SQLSTATE scoping each row, and nothing for a text
// no row names.
#include "pgoutbox/replication/failure_cause.h"

#include <gtest/gtest.h>

#include <vector>

namespace pgoutbox::replication {
namespace {

TEST(FailureCause, Table) {
  struct Case {
    const char* sqlstate;
    const char* message;
    FailureCause cause;
  };
  const std::vector<Case> cases = {
      {"", "connection to server at \"localhost\" (127.0.0.1), port 5432 failed: SSL error: certificate verify failed",
       FailureCause::tls_untrusted},
      {"", "root certificate file \"/root/.postgresql/root.crt\" does not exist", FailureCause::tls_untrusted},
      {"", "server certificate for \"localhost\" does not match host name \"127.0.0.1\"",
       FailureCause::tls_host_mismatch},
      {"", "FATAL:  connection requires a valid client certificate", FailureCause::tls_client_cert},
      {"", "FATAL:  certificate authentication failed for user \"relay\"", FailureCause::tls_client_cert},
      {"", "SSL error: tlsv1 alert unknown ca", FailureCause::tls_client_cert},
      {"", "FATAL:  no pg_hba.conf entry for replication connection from host \"10.0.0.1\"",
       FailureCause::no_hba_entry},
      {"", "FATAL:  password authentication failed for user \"app\"", FailureCause::authentication},
      {"", "connection to server at \"127.0.0.1\", port 5 failed: fe_sendauth: no password supplied",
       FailureCause::authentication},
      {"", "FATAL:  role \"app\" is not permitted to log in", FailureCause::authentication},
      {"", "FATAL:  must be superuser or replication role to start walsender", FailureCause::permission},
      {"", "FATAL:  permission denied to start WAL sender", FailureCause::permission},
      {"", "FATAL:  permission denied for database \"app\"", FailureCause::permission},
      {"", "FATAL:  the database system is starting up", FailureCause::none},
      {"", "FATAL:  sorry, too many clients already", FailureCause::none},
      {"", "connection to server on socket \"/tmp/.s.PGSQL.5432\" failed: Connection refused", FailureCause::none},
      {"55000", "logical decoding requires wal_level >= logical", FailureCause::wal_level},
      {"55000", "can no longer get changes from replication slot \"s\"", FailureCause::slot_invalidated},
      {"55000", "This slot has been invalidated because it exceeded the maximum reserved size.",
       FailureCause::slot_invalidated},
      {"55000", "publication \"p\" cannot be used", FailureCause::publication},
      {"55000", "replication slot \"s\" was not created in this database", FailureCause::slot_unusable},
      {"42704", "publication \"p\" does not exist", FailureCause::publication},
      {"42704", "replication slot \"s\" does not exist", FailureCause::slot_unusable},
      // A row applies to its own SQLSTATE only.
      {"", "publication \"p\" does not exist", FailureCause::none},
      {"42P01", "logical decoding requires wal_level >= logical", FailureCause::none},
      {"55000", "permission denied to start WAL sender", FailureCause::slot_unusable},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(cause_of_text(c.sqlstate, c.message), c.cause) << "[" << c.sqlstate << "] " << c.message;
  }
}

}  // namespace
}  // namespace pgoutbox::replication
