// Why a connection could not be opened (failure_cause.h): libpq's status first (it asked for a password that was
// not given), then its text (it carries no SQLSTATE), and the fix of each cause.
#include "pgoutbox/replication/failure_cause.h"

#include <gtest/gtest.h>

namespace pgoutbox::replication {
namespace {

TEST(ConnectFailureTest, EachCauseHasItsKindAndFix) {
  const auto untrusted = connect_failure_of(
      false,
      "connection to server at \"localhost\" (127.0.0.1), port 5432 failed: SSL error: certificate verify failed");
  EXPECT_EQ(untrusted, FailureCause::tls_untrusted);
  EXPECT_NE(connect_fix(untrusted).find("sslrootcert"), std::string::npos);

  EXPECT_EQ(connect_failure_of(false,
                               "connection to server at \"127.0.0.1\", port 5432 failed: server certificate for "
                               "\"localhost\" does not match host name \"127.0.0.1\""),
            FailureCause::tls_host_mismatch);

  const auto hba = connect_failure_of(
      false, "FATAL:  no pg_hba.conf entry for host \"127.0.0.1\", user \"x\", database \"postgres\", SSL encryption");
  EXPECT_EQ(hba, FailureCause::no_hba_entry);
  EXPECT_NE(connect_fix(hba).find("pg_hba.conf"), std::string::npos);

  EXPECT_EQ(connect_failure_of(false, "FATAL:  password authentication failed for user \"relay\""),
            FailureCause::authentication);
  EXPECT_EQ(connect_failure_of(false, "FATAL:  connection requires a valid client certificate"),
            FailureCause::tls_client_cert);
  EXPECT_EQ(connect_failure_of(false, "FATAL:  permission denied to start WAL sender"), FailureCause::permission);
  EXPECT_NE(connect_fix(FailureCause::permission).find("REPLICATION"), std::string::npos);

  const auto refused =
      connect_failure_of(false, "connection to server at \"127.0.0.1\", port 1 failed: Connection refused");
  EXPECT_EQ(refused, FailureCause::none);
  EXPECT_TRUE(connect_fix(refused).empty());
  // Causes a connection start does not have carry no fix of one.
  EXPECT_TRUE(connect_fix(FailureCause::wal_level).empty());
}

// libpq's status decides before any text: a server that asked for a password none was given for
// is an authentication failure whatever the message says.
TEST(ConnectFailureTest, ANeededPasswordDecidesBeforeTheText) {
  EXPECT_EQ(connect_failure_of(true, "connection to server at \"127.0.0.1\", port 5432 failed: something new"),
            FailureCause::authentication);
  EXPECT_EQ(connect_failure_of(false, "connection to server at \"127.0.0.1\", port 5432 failed: something new"),
            FailureCause::none);
}

}  // namespace
}  // namespace pgoutbox::replication
