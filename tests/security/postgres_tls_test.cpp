// pgoutbox against a Postgres that only accepts TLS: scram-sha-256 with sslmode=verify-full, and
// client-certificate authentication; a wrong CA, a wrong host name, a wrong password and a user
// pg_hba.conf does not list each say so, in `run` and in `check`, and the password is never
// printed. The CA and the certificates are made in the test with the openssl command line.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "../app/operator_fixture.h"
#include "eventually.h"
#include "kafka_client.h"
#include "pgoutbox_process.h"
#include "services.h"
#include "test_ca.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kPassword = "Sc3ret-ov3r-TLS";  // grepped for in every output
constexpr int kExitAuthentication = 16;               // docs/operating.md "Exit codes"
constexpr int kExitTls = 20;                          // docs/operating.md "Exit codes": certificate verification failed

struct TlsPostgres {
  std::optional<RunAs> account = service_account();
  ScratchDir certs{"pg-tls", account};
  TestCa ca{certs.path(), "ca"};
  TestCa other_ca{certs.path(), "other-ca"};
  TestCa::Issued server = ca.issue("server", "localhost", "DNS:localhost", account);
  TestCa::Issued client = ca.issue("client", "certuser");
  PgCluster pg{{{"ssl", "on"},
                {"ssl_cert_file", server.cert},
                {"ssl_key_file", server.key},
                {"ssl_ca_file", ca.cert()},
                {"password_encryption", "scram-sha-256"}},
               // The harness's own superuser sessions stay trusted; pgoutbox's users need TLS. A
               // logical replication connection matches the database column like any session.
               "local all all trust\n"
               "host all postgres 127.0.0.1/32 trust\n"
               "hostssl postgres relay 127.0.0.1/32 scram-sha-256\n"
               "hostssl postgres certuser 127.0.0.1/32 cert\n"
               "hostnossl all all 127.0.0.1/32 reject\n"};
};

class PostgresTlsTest : public ::testing::Test {
 protected:
  static TlsPostgres& tls() {
    static TlsPostgres instance;
    return instance;
  }

  static void SetUpTestSuite() {
    auto& pg = tls().pg;
    pg.exec(std::string("CREATE ROLE relay LOGIN REPLICATION PASSWORD '") + kPassword +
            "';"
            "CREATE ROLE certuser LOGIN REPLICATION;"
            "CREATE ROLE stranger LOGIN REPLICATION PASSWORD 'x';"
            "CREATE TABLE sec_outbox (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text NOT NULL, "
            "aggregateid text, type text, payload jsonb);"
            "GRANT SELECT ON sec_outbox TO relay, certuser, stranger;"
            "CREATE PUBLICATION sec_pub FOR TABLE sec_outbox WITH (publish = 'insert')");
  }

  PgCluster& pg = tls().pg;
  KafkaBroker& kafka = shared_kafka();
  ScratchDir dir{"pg-tls-run", std::nullopt};

  std::string dsn(const std::string& user, const std::string& host, const std::string& root_cert,
                  const std::string& extra = "") {
    return "host=" + host + " hostaddr=127.0.0.1 port=" + std::to_string(pg.port()) + " dbname=postgres user=" + user +
           " sslmode=verify-full sslrootcert=" + root_cert + extra;
  }

  std::string config(const std::string& name, const std::string& dsn_text) {
    PgoutboxConfig c;
    c.dsn = dsn_text;
    c.slot = name + "_slot";
    c.publication = "sec_pub";
    c.brokers = kafka.bootstrap();
    c.tables.push_back({.table = "public.sec_outbox", .topic = name});
    return write_pgoutbox_config(dir.path() + "/" + name + ".yaml", c);
  }

  std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // Streams one row through `run`, then checks `check` passes; returns both outputs.
  std::string stream_one_row(const std::string& name, const std::string& dsn_text, std::vector<std::string> env) {
    const auto cfg = config(name, dsn_text);
    PgoutboxProcess process(PGOUTBOX_BINARY, cfg, dir.path() + "/" + name + ".log", env);
    PGOUTBOX_EXPECT_EVENTUALLY(
        pg.query_value("SELECT active FROM pg_replication_slots WHERE slot_name = '" + name + "_slot'") == "t", 60s);
    // The walsender's session is encrypted. Waited for: the slot is active for a moment while it is
    // created, before the session that streams from it holds it.
    PGOUTBOX_EXPECT_EVENTUALLY(
        pg.query_value("SELECT bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_replication_slots r ON r.active_pid = "
                       "s.pid WHERE r.slot_name = '" +
                       name + "_slot'") == "t",
        60s);
    pg.exec("INSERT INTO sec_outbox (aggregatetype, aggregateid, payload) VALUES ('S', '" + name + "', '{}')");
    const auto got = read_topic(kafka.bootstrap(), name, 1, 60s);
    EXPECT_EQ(got.size(), 1U);
    process.signal(SIGTERM);
    EXPECT_EQ(process.wait_exit(30s), 0);
    const auto check = run_pgoutbox(dir.path(), {"check", "-c", cfg}, env);
    EXPECT_EQ(check.exit_code, 0) << check.output;
    pg.drop_slot_when_free(name + "_slot");
    return read_file(dir.path() + "/" + name + ".log") + check.output;
  }

  struct Refusal {
    std::optional<int> exit_code;  // nullopt: run kept retrying
    std::string run_output;
    CommandResult check;
  };

  Refusal refused(const std::string& name, const std::string& dsn_text, std::vector<std::string> env,
                  const std::string& expected_message) {
    const auto cfg = config(name, dsn_text);
    const std::string log = dir.path() + "/" + name + ".log";
    PgoutboxProcess process(PGOUTBOX_BINARY, cfg, log, env);
    Refusal r;
    PGOUTBOX_EXPECT_EVENTUALLY(read_file(log).find(expected_message) != std::string::npos || !process.running(), 30s);
    r.exit_code = process.wait_exit(2s);
    if (!r.exit_code) {
      process.signal(SIGTERM);
      process.wait_exit(30s);
    }
    r.run_output = read_file(log);
    r.check = run_pgoutbox(dir.path(), {"check", "-c", cfg}, env);
    return r;
  }
};

TEST_F(PostgresTlsTest, ScramOverVerifyFullStreamsAndNeverPrintsThePassword) {
  const auto output = stream_one_row("tls_scram", dsn("relay", "localhost", tls().ca.cert()),
                                     {std::string("PGOUTBOX_POSTGRES_PASSWORD=") + kPassword});
  EXPECT_EQ(output.find(kPassword), std::string::npos) << output;
}

TEST_F(PostgresTlsTest, ClientCertificateAuthenticationStreams) {
  stream_one_row(
      "tls_cert",
      dsn("certuser", "localhost", tls().ca.cert(), " sslcert=" + tls().client.cert + " sslkey=" + tls().client.key),
      {});
}

TEST_F(PostgresTlsTest, AnUntrustedServerCertificateIsNamedWithTheFix) {
  const auto r = refused("tls_wrong_ca", dsn("relay", "localhost", tls().other_ca.cert()),
                         {std::string("PGOUTBOX_POSTGRES_PASSWORD=") + kPassword}, "certificate verify failed");
  // A session that never streamed cannot be healed by retrying a certificate it cannot verify.
  EXPECT_EQ(r.exit_code, kExitTls) << r.run_output;
  EXPECT_NE(r.run_output.find("Fix: the server's certificate is not signed by the CA in sslrootcert"),
            std::string::npos)
      << r.run_output;
  EXPECT_EQ(r.check.exit_code, 1) << r.check.output;
  const auto line = line_starting(r.check.output, "FAIL  postgres:");
  EXPECT_NE(line.find("certificate verify failed"), std::string::npos) << r.check.output;
  EXPECT_NE(line.find("Fix: the server's certificate is not signed by the CA in sslrootcert"), std::string::npos)
      << r.check.output;
  EXPECT_EQ(r.run_output.find(kPassword), std::string::npos);
  EXPECT_EQ(r.check.output.find(kPassword), std::string::npos);
}

TEST_F(PostgresTlsTest, AHostNameTheCertificateDoesNotNameIsRefusedWithTheFix) {
  const auto r = refused("tls_wrong_host", dsn("relay", "127.0.0.1", tls().ca.cert()),
                         {std::string("PGOUTBOX_POSTGRES_PASSWORD=") + kPassword}, "does not match host name");
  EXPECT_EQ(r.exit_code, kExitTls) << r.run_output;
  EXPECT_NE(r.run_output.find("Fix: sslmode=verify-full: connect with a host name the server's certificate names"),
            std::string::npos)
      << r.run_output;
  EXPECT_EQ(r.check.exit_code, 1) << r.check.output;
  const auto line = line_starting(r.check.output, "FAIL  postgres:");
  EXPECT_NE(line.find("does not match host name"), std::string::npos) << r.check.output;
  EXPECT_NE(line.find("Fix: sslmode=verify-full"), std::string::npos) << r.check.output;
}

TEST_F(PostgresTlsTest, AWrongPasswordStopsRunWithTheAuthenticationCode) {
  const auto r = refused("tls_wrong_password", dsn("relay", "localhost", tls().ca.cert()),
                         {"PGOUTBOX_POSTGRES_PASSWORD=not-the-password"}, "password authentication failed");
  EXPECT_EQ(r.exit_code, kExitAuthentication) << r.run_output;
  EXPECT_EQ(r.check.exit_code, 1) << r.check.output;
  const auto line = line_starting(r.check.output, "FAIL  postgres:");
  EXPECT_NE(line.find("password authentication failed for user \"relay\""), std::string::npos) << r.check.output;
  EXPECT_NE(line.find("Fix: check the password"), std::string::npos) << r.check.output;
  EXPECT_NE(r.run_output.find("Fix: check the password"), std::string::npos) << r.run_output;
  EXPECT_EQ(r.run_output.find("not-the-password"), std::string::npos) << r.run_output;
  EXPECT_EQ(r.check.output.find("not-the-password"), std::string::npos) << r.check.output;
}

TEST_F(PostgresTlsTest, AUserPgHbaDoesNotListStopsRunAndCheckNamesTheMissingLine) {
  const auto r = refused("tls_no_hba", dsn("stranger", "localhost", tls().ca.cert()), {"PGOUTBOX_POSTGRES_PASSWORD=x"},
                         "no pg_hba.conf entry");
  EXPECT_EQ(r.exit_code, kExitAuthentication) << r.run_output;
  EXPECT_EQ(r.check.exit_code, 1) << r.check.output;
  const auto line = line_starting(r.check.output, "FAIL  postgres:");
  EXPECT_NE(line.find("user \"stranger\""), std::string::npos) << r.check.output;
  EXPECT_NE(line.find("Fix: add a pg_hba.conf line"), std::string::npos) << r.check.output;
  // run names the same fix as check (issue 20).
  EXPECT_NE(r.run_output.find("Fix: add a pg_hba.conf line"), std::string::npos) << r.run_output;
}

}  // namespace
}  // namespace pgoutbox::test
