// `pgoutbox status` and `pgoutbox slot drop` against a real slot that a running pgoutbox moves,
// and the promise that secrets never appear in what the operator's commands print.
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>

#include "eventually.h"
#include "kafka_client.h"
#include "operator_fixture.h"
#include "pgoutbox/lsn.h"
#include "pgoutbox_config.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

struct StatusJson {
  bool active = false;
  std::optional<std::int64_t> active_pid;
  std::string plugin;
  Lsn confirmed_flush;
  std::int64_t lag_bytes = -1;
  std::int64_t retained_wal_bytes = -1;
  std::string wal_status;
};

class StatusCommandTest : public ::testing::Test {
 protected:
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();
  ScratchDir dir{"status-test", std::nullopt};

  std::string write_config(const std::string& name, const std::string& extra = "") {
    pg.exec("CREATE TABLE IF NOT EXISTS " + name +
            " (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text, aggregateid text, payload jsonb)");
    auto config = pipeline_config(pg.dsn(), kafka.bootstrap(), name);
    config.extra_yaml = extra;
    return write_pgoutbox_config(dir.path() + "/" + name + ".yaml", config);
  }

  ChildProcess start_run(const std::string& config) {
    return ChildProcess({.argv = {PGOUTBOX_BINARY, "run", "-c", config},
                         .log_path = dir.path() + "/run.log",
                         .run_as = std::nullopt,
                         .extra_env = {}});
  }

  static void stop_run(ChildProcess& process) {
    process.signal_leader(SIGTERM);
    const auto status = process.wait(30s);
    ASSERT_TRUE(status) << "pgoutbox run did not stop";
  }

  bool slot_active(const std::string& slot) {
    return pg.query_value("SELECT active FROM pg_replication_slots WHERE slot_name = '" + slot + "'") == "t";
  }
  bool slot_exists(const std::string& slot) {
    return pg.query_value("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot + "'") == "1";
  }

  // `status --json`, parsed by a real JSON parser.
  std::optional<StatusJson> status_json(const std::string& config) {
    const auto result = run_pgoutbox(dir.path(), {"status", "-c", config, "--json"});
    EXPECT_EQ(result.exit_code, 0) << result.output;
    const auto line = line_starting(result.output, "{");
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(line).get(doc) != simdjson::SUCCESS) {
      ADD_FAILURE() << "not JSON: " << result.output;
      return std::nullopt;
    }
    StatusJson s;
    s.active = doc["active"].get_bool().value();
    if (!doc["active_pid"].is_null()) s.active_pid = doc["active_pid"].get_int64().value();
    s.plugin = std::string(doc["plugin"].get_string().value());
    s.confirmed_flush = Lsn::parse(doc["confirmed_flush_lsn"].get_string().value()).value_or(Lsn{});
    s.lag_bytes = doc["lag_bytes"].get_int64().value();
    s.retained_wal_bytes = doc["retained_wal_bytes"].get_int64().value();
    s.wal_status = std::string(doc["wal_status"].get_string().value());
    return s;
  }

  Lsn current_lsn() { return *Lsn::parse(*pg.query_value("SELECT pg_current_wal_lsn()")); }
};

TEST_F(StatusCommandTest, JsonFollowsTheSlotAsEventsAreWrittenAndConfirmed) {
  const auto config = write_config("st_moves");
  auto process = start_run(config);
  // The creating walsender holds the slot (active) while CREATE_REPLICATION_SLOT waits for a
  // consistent point, and confirmed_flush_lsn stays NULL until it is found: wait for both.
  PGOUTBOX_ASSERT_EVENTUALLY(
      pg.query_value("SELECT active AND confirmed_flush_lsn IS NOT NULL FROM pg_replication_slots "
                     "WHERE slot_name = 'st_moves_slot'") == std::optional<std::string>("t"),
      30s);

  const auto before = status_json(config);
  ASSERT_TRUE(before);
  EXPECT_TRUE(before->active);
  EXPECT_EQ(before->plugin, "pgoutput");
  EXPECT_EQ(before->wal_status, "reserved");
  ASSERT_TRUE(before->active_pid);
  EXPECT_EQ(std::to_string(*before->active_pid),
            pg.query_value("SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'st_moves_slot'"));

  pg.exec(
      "INSERT INTO st_moves (aggregatetype, aggregateid, payload) SELECT 'E', 'k' || g, '{}' "
      "FROM generate_series(1, 200) g");
  const auto committed = current_lsn();
  ASSERT_EQ(read_topic(kafka.bootstrap(), "st_moves.E", 200, 60s).size(), 200U);
  // Once Kafka has acknowledged them, the confirmed position passes their commit.
  PGOUTBOX_ASSERT_EVENTUALLY(status_json(config)->confirmed_flush >= Lsn{committed.value - 1}, 30s);
  EXPECT_GT(status_json(config)->confirmed_flush, before->confirmed_flush);

  // With pgoutbox stopped, new events are lag: written, not confirmed.
  stop_run(process);
  PGOUTBOX_ASSERT_EVENTUALLY(!slot_active("st_moves_slot"), 30s);
  const auto stopped = status_json(config);
  ASSERT_TRUE(stopped);
  EXPECT_FALSE(stopped->active);
  EXPECT_FALSE(stopped->active_pid);
  pg.exec(
      "INSERT INTO st_moves (aggregatetype, aggregateid, payload) SELECT 'E', 'late' || g, "
      "jsonb_build_object('pad', repeat('x', 500)) FROM generate_series(1, 100) g");
  const auto behind = status_json(config);
  ASSERT_TRUE(behind);
  EXPECT_GT(behind->lag_bytes, stopped->lag_bytes + 50'000) << "100 rows of 500+ bytes were written";
  EXPECT_EQ(behind->confirmed_flush, stopped->confirmed_flush);
  EXPECT_GE(behind->retained_wal_bytes, behind->lag_bytes);
  ASSERT_TRUE(pg.drop_slot_when_free("st_moves_slot"));
}

TEST_F(StatusCommandTest, TextOutputNamesTheSlotAndAMissingSlotHasItsOwnCode) {
  const auto config = write_config("st_text");
  auto missing = run_pgoutbox(dir.path(), {"status", "-c", config});
  EXPECT_EQ(missing.exit_code, 6) << missing.output;
  EXPECT_TRUE(missing.printed("replication slot \"st_text_slot\" does not exist")) << missing.output;

  pg.exec("SELECT pg_create_logical_replication_slot('st_text_slot', 'pgoutput')");
  const auto shown = run_pgoutbox(dir.path(), {"status", "-c", config});
  EXPECT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_NE(line_starting(shown.output, "slot").find("st_text_slot"), std::string::npos) << shown.output;
  EXPECT_NE(line_starting(shown.output, "active").find("no"), std::string::npos) << shown.output;
  EXPECT_NE(line_starting(shown.output, "wal_status").find("reserved"), std::string::npos) << shown.output;
  ASSERT_TRUE(pg.drop_slot_when_free("st_text_slot"));
}

TEST_F(StatusCommandTest, UnreachablePostgresHasItsOwnCode) {
  const auto config = write_config("st_nopg");
  const auto result = run_pgoutbox(
      dir.path(), {"status", "-c", config},
      {"PGOUTBOX_POSTGRES_DSN=host=127.0.0.1 port=" + std::to_string(free_loopback_port()) + " user=postgres"});
  EXPECT_EQ(result.exit_code, 5) << result.output;
  EXPECT_TRUE(result.printed("cannot connect to PostgreSQL")) << result.output;
}

TEST_F(StatusCommandTest, SlotDropRefusesWithoutYesAndWhileActiveThenDrops) {
  const auto config = write_config("st_drop");
  auto process = start_run(config);
  PGOUTBOX_ASSERT_EVENTUALLY(slot_active("st_drop_slot"), 30s);

  const auto while_active = run_pgoutbox(dir.path(), {"slot", "drop", "-c", config, "--yes"});
  EXPECT_EQ(while_active.exit_code, 7) << while_active.output;
  EXPECT_TRUE(while_active.printed("streams from it")) << while_active.output;
  EXPECT_TRUE(slot_exists("st_drop_slot"));

  stop_run(process);
  PGOUTBOX_ASSERT_EVENTUALLY(!slot_active("st_drop_slot"), 30s);
  // What a finished backfill leaves beside its slot (docs/migrating.md "Backfill at slot creation").
  pg.exec("SELECT pg_create_physical_replication_slot('st_drop_slot_backfilled')");
  const auto unconfirmed = run_pgoutbox(dir.path(), {"slot", "drop", "-c", config});
  EXPECT_EQ(unconfirmed.exit_code, 1) << unconfirmed.output;
  EXPECT_TRUE(unconfirmed.printed("refusing to drop replication slot \"st_drop_slot\" without --yes"))
      << unconfirmed.output;
  EXPECT_TRUE(slot_exists("st_drop_slot"));

  const auto dropped = run_pgoutbox(dir.path(), {"slot", "drop", "-c", config, "--yes"});
  EXPECT_EQ(dropped.exit_code, 0) << dropped.output;
  EXPECT_TRUE(dropped.printed("dropped replication slot \"st_drop_slot\"")) << dropped.output;
  EXPECT_TRUE(dropped.printed("bytes of WAL were written since, by any table: WAL, not events")) << dropped.output;
  EXPECT_FALSE(slot_exists("st_drop_slot"));
  EXPECT_TRUE(dropped.printed("dropped its backfill marker slot \"st_drop_slot_backfilled\"")) << dropped.output;
  EXPECT_FALSE(slot_exists("st_drop_slot_backfilled"));

  const auto again = run_pgoutbox(dir.path(), {"slot", "drop", "-c", config, "--yes"});
  EXPECT_EQ(again.exit_code, 6) << again.output;
}

TEST_F(StatusCommandTest, SecretsNeverAppearInWhatTheCommandsPrint) {
  const std::string pg_secret = "pg-Secret-7f3a9c";
  const std::string kafka_secret = "kafka-Secret-51be0d";
  const auto config = write_config("st_secret");
  pg.exec("SELECT pg_create_logical_replication_slot('st_secret_slot', 'pgoutput')");
  const std::vector<std::string> env = {"PGOUTBOX_POSTGRES_PASSWORD=" + pg_secret,
                                        "PGOUTBOX_KAFKA_PROPERTY_SASL_PASSWORD=" + kafka_secret};
  const std::vector<std::vector<std::string>> commands = {
      {"check", "-c", config, "--kafka-timeout", "3"},
      {"status", "-c", config},
      {"status", "-c", config, "--json"},
      {"slot", "drop", "-c", config},
  };
  for (const auto& args : commands) {
    const auto result = run_pgoutbox(dir.path(), args, env);
    EXPECT_NE(result.exit_code, -1) << args[0];
    EXPECT_FALSE(result.output.empty()) << args[0];
    EXPECT_FALSE(result.printed(pg_secret)) << args[0] << ":\n" << result.output;
    EXPECT_FALSE(result.printed(kafka_secret)) << args[0] << ":\n" << result.output;
  }
  // A password written into the DSN itself is redacted too.
  const std::string dsn_secret = "dsn-Secret-0c77e2";
  for (const auto& args : commands) {
    const auto result =
        run_pgoutbox(dir.path(), args, {"PGOUTBOX_POSTGRES_DSN=" + pg.dsn() + " password=" + dsn_secret});
    EXPECT_NE(result.exit_code, -1) << args[0];
    EXPECT_FALSE(result.printed(dsn_secret)) << args[0] << ":\n" << result.output;
    if (args[0] == "check") {
      EXPECT_TRUE(result.printed("password=********")) << result.output;
    }
  }
  // The same with Postgres unreachable: the error path prints no secret either.
  auto unreachable = env;
  unreachable.push_back("PGOUTBOX_POSTGRES_DSN=host=127.0.0.1 port=" + std::to_string(free_loopback_port()) +
                        " user=postgres");
  for (const auto& args : commands) {
    const auto result = run_pgoutbox(dir.path(), args, unreachable);
    EXPECT_FALSE(result.printed(pg_secret)) << args[0] << ":\n" << result.output;
  }
  ASSERT_TRUE(pg.drop_slot_when_free("st_secret_slot"));
}

}  // namespace
}  // namespace pgoutbox::test
