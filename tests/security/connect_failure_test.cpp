// libpq's connection failures told apart by their text (they carry no SQLSTATE), with the fix.
#include "pgoutbox/replication/connect_failure.h"

#include <gtest/gtest.h>

namespace pgoutbox::replication {
namespace {

TEST(ConnectFailureTest, EachCauseHasItsKindAndFix) {
  const auto untrusted = diagnose_connect_failure(
      "connection to server at \"localhost\" (127.0.0.1), port 5432 failed: SSL error: certificate verify failed");
  EXPECT_EQ(untrusted.kind, ConnectFailure::tls_untrusted);
  EXPECT_TRUE(untrusted.permanent);
  EXPECT_NE(untrusted.fix.find("sslrootcert"), std::string::npos);

  const auto host = diagnose_connect_failure(
      "connection to server at \"127.0.0.1\", port 5432 failed: server certificate for \"localhost\" does not match "
      "host name \"127.0.0.1\"");
  EXPECT_EQ(host.kind, ConnectFailure::tls_host_mismatch);

  const auto hba = diagnose_connect_failure(
      "FATAL:  no pg_hba.conf entry for host \"127.0.0.1\", user \"x\", database \"postgres\", SSL encryption");
  EXPECT_EQ(hba.kind, ConnectFailure::no_hba_entry);
  EXPECT_NE(hba.fix.find("pg_hba.conf"), std::string::npos);

  EXPECT_EQ(diagnose_connect_failure("FATAL:  password authentication failed for user \"relay\"").kind,
            ConnectFailure::authentication);
  EXPECT_EQ(diagnose_connect_failure("FATAL:  connection requires a valid client certificate").kind,
            ConnectFailure::tls_client_cert);

  const auto refused =
      diagnose_connect_failure("connection to server at \"127.0.0.1\", port 1 failed: Connection refused");
  EXPECT_EQ(refused.kind, ConnectFailure::other);
  EXPECT_FALSE(refused.permanent);
  EXPECT_TRUE(refused.fix.empty());
}

}  // namespace
}  // namespace pgoutbox::replication
