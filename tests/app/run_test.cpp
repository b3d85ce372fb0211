// `pgoutbox run -c FILE` as a process: configuration from YAML and the environment, signals,
// exit codes.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "eventually.h"
#include "kafka_client.h"
#include "pgoutbox/lsn.h"
#include "pgoutbox_config.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

class RunCommandTest : public ::testing::Test {
 protected:
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();
  ScratchDir dir{"run-test", std::nullopt};

  std::string write_config(const std::string& name, const std::string& extra = "") {
    pg.exec("CREATE TABLE IF NOT EXISTS " + name +
            " (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text, aggregateid text, type text, payload "
            "jsonb)");
    auto config = pipeline_config(pg.dsn(), kafka.bootstrap(), name);
    config.extra_yaml = extra;
    return write_pgoutbox_config(dir.path() + "/" + name + ".yaml", config);
  }

  ChildProcess start(const std::string& config, std::vector<std::string> env = {}) {
    return ChildProcess({.argv = {PGOUTBOX_BINARY, "run", "-c", config},
                         .log_path = dir.path() + "/pgoutbox.log",
                         .run_as = std::nullopt,
                         .extra_env = std::move(env)});
  }

  bool slot_active(const std::string& slot) {
    return pg.query_value("SELECT active FROM pg_replication_slots WHERE slot_name = '" + slot + "'") == "t";
  }
};

TEST_F(RunCommandTest, StreamsUntilSigtermThenConfirmsAndExitsZero) {
  const auto config = write_config("cli_basic");
  auto process = start(config);
  PGOUTBOX_ASSERT_EVENTUALLY(slot_active("cli_basic_slot"), 30s);
  pg.exec(
      "INSERT INTO cli_basic (aggregatetype, aggregateid, payload) SELECT 'E', 'k' || g, '{}' FROM generate_series(1, "
      "500) g");
  ASSERT_EQ(read_topic(kafka.bootstrap(), "cli_basic.E", 500, 60s).size(), 500U);
  const auto last_lsn = *Lsn::parse(*pg.query_value("SELECT pg_current_wal_lsn()"));

  process.signal_leader(SIGTERM);
  const auto status = process.wait(30s);
  ASSERT_TRUE(status) << "pgoutbox did not exit after SIGTERM";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "status " << *status;
  const auto confirmed = Lsn::parse(
      *pg.query_value("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'cli_basic_slot'"));
  EXPECT_GE(*confirmed, Lsn{last_lsn.value - 1}) << "the final flush did not reach the slot";
  EXPECT_FALSE(slot_active("cli_basic_slot"));
}

TEST_F(RunCommandTest, ASecondSignalExitsAtOnceWithoutConfirmingUnacknowledgedWork) {
  const auto config = write_config("cli_twice", "shutdown_timeout: 5m\n");
  auto process = start(config);
  PGOUTBOX_ASSERT_EVENTUALLY(slot_active("cli_twice_slot"), 30s);
  pg.exec("INSERT INTO cli_twice (aggregatetype, aggregateid, payload) VALUES ('E', 'k', '{}')");
  ASSERT_EQ(read_topic(kafka.bootstrap(), "cli_twice.E", 1, 30s).size(), 1U);
  const auto slot_lsn = [&] {
    return *Lsn::parse(
        *pg.query_value("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'cli_twice_slot'"));
  };
  kafka.pause();  // nothing more can be acknowledged
  pg.exec("INSERT INTO cli_twice (aggregatetype, aggregateid, payload) VALUES ('E', 'unacked', '{}')");
  const auto unacked_commit = *Lsn::parse(*pg.query_value("SELECT pg_current_wal_lsn()"));
  // pgoutbox reports as its write position what it has received and handed on: once that
  // passes the commit, the record is in flight (and can't be acknowledged).
  PGOUTBOX_ASSERT_EVENTUALLY(*Lsn::parse(pg.query_value("SELECT write_lsn FROM pg_stat_replication WHERE "
                                                        "application_name = 'pgoutbox'")
                                             .value_or("0/0")) >= unacked_commit,
                             30s);
  process.signal_leader(SIGTERM);
  EXPECT_FALSE(process.wait(1500ms)) << "exited while a record was unacknowledged and the timeout is 5 minutes";
  process.signal_leader(SIGTERM);
  const auto status = process.wait(10s);
  kafka.resume();
  ASSERT_TRUE(status) << "a second signal did not end the process";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 130) << "status " << *status;
  EXPECT_LT(slot_lsn(), unacked_commit) << "confirmed past an unacknowledged record";
}

TEST_F(RunCommandTest, AShutdownTimeoutWithRecordsUnacknowledgedHasItsOwnExitCode) {
  const auto config = write_config("cli_timeout", "shutdown_timeout: 1s\n");
  auto process = start(config);
  PGOUTBOX_ASSERT_EVENTUALLY(slot_active("cli_timeout_slot"), 30s);
  pg.exec("INSERT INTO cli_timeout (aggregatetype, aggregateid, payload) VALUES ('E', 'k', '{}')");
  ASSERT_EQ(read_topic(kafka.bootstrap(), "cli_timeout.E", 1, 30s).size(), 1U);
  kafka.pause();  // nothing more can be acknowledged
  pg.exec("INSERT INTO cli_timeout (aggregatetype, aggregateid, payload) VALUES ('E', 'unacked', '{}')");
  const auto unacked_commit = *Lsn::parse(*pg.query_value("SELECT pg_current_wal_lsn()"));
  PGOUTBOX_ASSERT_EVENTUALLY(*Lsn::parse(pg.query_value("SELECT write_lsn FROM pg_stat_replication WHERE "
                                                        "application_name = 'pgoutbox'")
                                             .value_or("0/0")) >= unacked_commit,
                             30s);
  process.signal_leader(SIGTERM);
  const auto status = process.wait(20s);
  kafka.resume();
  ASSERT_TRUE(status) << "shutdown_timeout did not end the process";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 8) << "status " << *status;
  EXPECT_LT(*Lsn::parse(*pg.query_value(
                "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'cli_timeout_slot'")),
            unacked_commit)
      << "confirmed past an unacknowledged record";
}

TEST_F(RunCommandTest, AMappingCheckWouldBlockExitsSeventeenAtStartNotAtTheFirstRow) {
  const auto config = write_config("cli_map");
  for (const std::string variable :
       {"PGOUTBOX_TABLES_0_TOPIC=cli_map.${no_such_column}", "PGOUTBOX_TABLES_0_COLUMNS_PAYLOAD=no_such_payload"}) {
    auto process = start(config, {variable});
    const auto status = process.wait(30s);  // no row is ever inserted
    ASSERT_TRUE(status) << variable << ": still running, so it would have failed only at the first row";
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 17) << variable << ": status " << *status;
    std::ifstream log(dir.path() + "/pgoutbox.log");
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.find("streaming from slot"), std::string::npos) << "it started streaming (and turned ready):\n"
                                                                   << text;
    EXPECT_NE(text.find(variable.find("TOPIC") != std::string::npos ? "no_such_column" : "no_such_payload"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("tables[0].columns"), std::string::npos) << "the fix names the key:\n" << text;
  }
}

TEST_F(RunCommandTest, AMetricsAddressInUseExitsTwoNamingTheKeyAndItsLine) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const auto config =
      write_config("cli_port", "metrics_address: \"127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "\"\n");
  auto process = start(config);
  const auto status = process.wait(30s);
  ::close(listener);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2) << "status " << *status;
  std::ifstream log(dir.path() + "/pgoutbox.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find(config + ":12:18: metrics_address"), std::string::npos) << text;
}

// A failure that can heal (here: nothing listens on PostgreSQL's port) is retried, each warning one
// line (libpq's "\n\t" joined) naming the slot and where the cause and its fix are found.
TEST_F(RunCommandTest, ARetryWarningNamesTheSlotAndWhereToLookOnOneLine) {
  auto cfg = pipeline_config("host=127.0.0.1 port=" + std::to_string(free_loopback_port()) + " dbname=postgres",
                             kafka.bootstrap(), "cli_retry");
  cfg.log_format = "text";
  const auto config = write_pgoutbox_config(dir.path() + "/cli_retry.yaml", cfg);
  auto process = start(config);
  const auto log = [&] {
    std::ifstream in(dir.path() + "/pgoutbox.log");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  PGOUTBOX_ASSERT_EVENTUALLY(log().find("retrying in") != std::string::npos, 30s) << log();
  process.signal_leader(SIGTERM);
  const auto status = process.wait(30s);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "status " << *status;
  const auto text = log();
  const auto at = text.find("retrying in");
  const auto begin = text.rfind('\n', at) + 1;  // npos + 1 == 0 on the first line
  const auto line = text.substr(begin, text.find('\n', at) - begin);
  EXPECT_NE(line.find("slot cli_retry_slot: "), std::string::npos) << line;
  EXPECT_NE(line.find("Connection refused; Is the server running"), std::string::npos) << line;
  EXPECT_NE(line.find("pgoutbox check -c " + config + " names it and its fix"), std::string::npos) << line;
  EXPECT_EQ(line.find('\t'), std::string::npos) << line;
}

TEST_F(RunCommandTest, EnvironmentOverridesTheFile) {
  const auto config = write_config("cli_env");
  // The file names a topic template; the environment replaces it.
  auto process = start(config, {"PGOUTBOX_TABLES_0_TOPIC=from-env.${aggregatetype}"});
  PGOUTBOX_ASSERT_EVENTUALLY(slot_active("cli_env_slot"), 30s);
  pg.exec("INSERT INTO cli_env (aggregatetype, aggregateid, payload) VALUES ('X', 'k', '{}')");
  EXPECT_EQ(read_topic(kafka.bootstrap(), "from-env.X", 1, 30s).size(), 1U);
  process.signal_leader(SIGINT);
  const auto status = process.wait(30s);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
}

TEST_F(RunCommandTest, AnInvalidConfigExitsWithTheConfigCode) {
  const auto config = write_config("cli_bad", "limits:\n  resume_ratio: 7\n");
  auto process = start(config);
  const auto status = process.wait(30s);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2) << "status " << *status;
}

TEST_F(RunCommandTest, AMissingPublicationExitsWithItsOwnCodeAndAnExplanation) {
  const auto config = write_config("cli_nopub");
  // Same file, but publication creation switched off through the environment.
  auto process = start(config, {"PGOUTBOX_POSTGRES_CREATE_PUBLICATION=false"});
  const auto status = process.wait(30s);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 12) << "status " << *status;
  std::ifstream log(dir.path() + "/pgoutbox.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  // The log is JSON lines (not a terminal), where the message's quotes are escaped.
  EXPECT_NE(text.find(R"(publication \"cli_nopub_pub\" does not exist)"), std::string::npos) << text;
}

}  // namespace
}  // namespace pgoutbox::test
