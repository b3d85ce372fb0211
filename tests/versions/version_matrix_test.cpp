// pgoutbox as users run it, against the Postgres major PGOUTBOX_TEST_PG_MAJOR names (14, 16, 17,
// 18; unset: the system's 15): every payload type, a partitioned outbox, DDL on an unmapped
// column mid-stream, restart, a 100,000-row transaction, an idle slot that still advances, and
// check/status. CTest runs this binary once per major (tests/versions/CMakeLists.txt).
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <set>
#include <sstream>

#include "../app/operator_fixture.h"
#include "eventually.h"
#include "kafka_client.h"
#include "pgoutbox/lsn.h"
#include "pgoutbox_process.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

class VersionMatrixTest : public ::testing::Test {
 protected:
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();
  ScratchDir dir{"versions", std::nullopt};

  static void SetUpTestSuite() {
    const auto want = requested_pg_major();
    if (!want.empty()) {
      ASSERT_EQ(std::to_string(shared_postgres().server_major()), want);
    }
  }

  void outbox_table(const std::string& name, const std::string& payload_type = "jsonb",
                    const std::string& suffix = "") {
    pg.exec("CREATE TABLE " + name + " (id uuid " + (suffix.empty() ? "PRIMARY KEY " : "") +
            "DEFAULT gen_random_uuid(), aggregatetype text NOT NULL, aggregateid text, type text, payload " +
            payload_type + ", created_at timestamptz NOT NULL DEFAULT now())" + suffix);
  }

  std::string config(const std::string& name, const std::vector<std::string>& tables) {
    PgoutboxConfig c;
    c.dsn = pg.dsn();
    c.slot = name + "_slot";
    c.publication = name + "_pub";
    c.brokers = kafka.bootstrap();
    for (const auto& t : tables) c.tables.push_back({.table = "public." + t, .topic = t + ".${aggregatetype}"});
    return write_pgoutbox_config(dir.path() + "/" + name + ".yaml", c);
  }

  std::unique_ptr<PgoutboxProcess> start(const std::string& config_path, const std::string& log) {
    return std::make_unique<PgoutboxProcess>(PGOUTBOX_BINARY, config_path, dir.path() + "/" + log);
  }

  bool slot_active(const std::string& slot) {
    return pg.query_value("SELECT active FROM pg_replication_slots WHERE slot_name = '" + slot + "'") == "t";
  }

  std::string log_of(const std::string& log) {
    std::ifstream in(dir.path() + "/" + log);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  int expected_proto() const { return pg.server_major() >= 16 ? 4 : pg.server_major() == 15 ? 3 : 2; }

  static void stop(PgoutboxProcess& process) {
    process.signal(SIGTERM);
    EXPECT_EQ(process.wait_exit(30s), 0);
  }
};

TEST_F(VersionMatrixTest, NamesTheProtocolAtStartAndRelaysEveryPayloadTypeAsStored) {
  outbox_table("mx_jsonb");
  outbox_table("mx_json", "json");
  outbox_table("mx_text", "text");
  outbox_table("mx_bytea", "bytea");
  const auto cfg = config("mx_types", {"mx_jsonb", "mx_json", "mx_text", "mx_bytea"});
  auto process = start(cfg, "types.log");
  PGOUTBOX_ASSERT_EVENTUALLY(slot_active("mx_types_slot"), 60s);
  pg.exec(
      "BEGIN;"
      "INSERT INTO mx_jsonb (aggregatetype, aggregateid, payload) VALUES ('T', 'k', '{\"b\": 1, \"a\": [true, null]}');"
      "INSERT INTO mx_json (aggregatetype, aggregateid, payload) VALUES ('T', 'k', '{\"b\": 1,   \"a\": 2}');"
      "INSERT INTO mx_text (aggregatetype, aggregateid, payload) VALUES ('T', 'k', 'plain text ünïcode');"
      "INSERT INTO mx_bytea (aggregatetype, aggregateid, payload) VALUES ('T', 'k', '\\x00ff10ab'::bytea);"
      "COMMIT");
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"mx_jsonb.T", "{\"a\": [true, null], \"b\": 1}"},
      {"mx_json.T", "{\"b\": 1,   \"a\": 2}"},
      {"mx_text.T", "plain text ünïcode"},
      {"mx_bytea.T", std::string("\x00\xff\x10\xab", 4)},
  };
  for (const auto& [topic, value] : expected) {
    const auto got = read_topic(kafka.bootstrap(), topic, 1, 60s);
    ASSERT_EQ(got.size(), 1U) << topic;
    EXPECT_EQ(got[0].value, value) << topic;
    EXPECT_EQ(got[0].key, "k") << topic;
  }
  stop(*process);
  const auto log = log_of("types.log");
  EXPECT_NE(log.find("PostgreSQL " + std::to_string(pg.server_major()) + "."), std::string::npos) << log;
  EXPECT_NE(log.find("proto_version " + std::to_string(expected_proto())), std::string::npos) << log;
  EXPECT_NE(log.find("failover slots " + std::string(pg.server_major() >= 17 ? "yes" : "no")), std::string::npos)
      << log;
  // The slot pgoutbox created (keyword syntax on 14, option list from 15) is a pgoutput slot.
  EXPECT_EQ(pg.query_value("SELECT plugin FROM pg_replication_slots WHERE slot_name = 'mx_types_slot'"), "pgoutput");
  pg.drop_slot_when_free("mx_types_slot");
}

TEST_F(VersionMatrixTest, APartitionedOutboxAndDdlOnAnUnmappedColumnMidStream) {
  outbox_table("mx_parts", "jsonb", " PARTITION BY RANGE (created_at)");
  pg.exec(
      "CREATE TABLE mx_parts_2020 PARTITION OF mx_parts FOR VALUES FROM ('2020-01-01') TO ('2030-01-01');"
      "CREATE TABLE mx_parts_2030 PARTITION OF mx_parts FOR VALUES FROM ('2030-01-01') TO ('2040-01-01')");
  const auto cfg = config("mx_parts", {"mx_parts"});
  auto process = start(cfg, "parts.log");
  PGOUTBOX_ASSERT_EVENTUALLY(slot_active("mx_parts_slot"), 60s);
  pg.exec(
      "INSERT INTO mx_parts (aggregatetype, aggregateid, payload, created_at) VALUES "
      "('P', 'a', '{\"n\": 1}', '2025-01-01'), ('P', 'b', '{\"n\": 2}', '2035-01-01')");
  ASSERT_EQ(read_topic(kafka.bootstrap(), "mx_parts.P", 2, 60s).size(), 2U);
  // A column pgoutbox does not map appears, is filled, and goes again while it streams.
  pg.exec("ALTER TABLE mx_parts ADD COLUMN note text");
  pg.exec(
      "INSERT INTO mx_parts (aggregatetype, aggregateid, payload, created_at, note) VALUES "
      "('P', 'c', '{\"n\": 3}', '2025-06-01', 'x'), ('P', 'd', '{\"n\": 4}', '2036-01-01', 'y')");
  pg.exec("ALTER TABLE mx_parts DROP COLUMN note");
  pg.exec(
      "INSERT INTO mx_parts (aggregatetype, aggregateid, payload, created_at) VALUES ('P', 'e', '{\"n\": 5}', "
      "'2025-07-01')");
  const auto got = read_topic(kafka.bootstrap(), "mx_parts.P", 5, 60s);
  ASSERT_EQ(got.size(), 5U);
  std::set<std::string> keys;
  for (const auto& r : got) keys.insert(r.key.value_or(""));
  EXPECT_EQ(keys, (std::set<std::string>{"a", "b", "c", "d", "e"}));
  EXPECT_TRUE(process->running()) << log_of("parts.log");
  stop(*process);
  pg.drop_slot_when_free("mx_parts_slot");
}

TEST_F(VersionMatrixTest, RestartLosesNothingAndAHundredThousandRowTransactionArrivesWhole) {
  outbox_table("mx_big");
  const auto cfg = config("mx_big", {"mx_big"});
  auto process = start(cfg, "big-1.log");
  PGOUTBOX_ASSERT_EVENTUALLY(slot_active("mx_big_slot"), 60s);
  pg.exec(
      "INSERT INTO mx_big (aggregatetype, aggregateid, payload) SELECT 'B', 'first-' || g, '{}' "
      "FROM generate_series(1, 100) g");
  ASSERT_EQ(read_topic(kafka.bootstrap(), "mx_big.B", 100, 60s).size(), 100U);
  stop(*process);
  // Written while pgoutbox is down: the slot keeps it.
  pg.exec(
      "INSERT INTO mx_big (aggregatetype, aggregateid, payload) SELECT 'B', 'down-' || g, '{}' "
      "FROM generate_series(1, 100) g");
  process = start(cfg, "big-2.log");
  pg.exec(
      "INSERT INTO mx_big (aggregatetype, aggregateid, payload) SELECT 'B', 'bulk-' || g, jsonb_build_object('n', g) "
      "FROM generate_series(1, 100000) g");
  const auto got = read_topic(kafka.bootstrap(), "mx_big.B", 100'200, 180s);
  std::set<std::string> keys;
  for (const auto& r : got) keys.insert(r.key.value_or(""));
  EXPECT_EQ(keys.size(), 100'200U) << "received " << got.size() << " records";
  EXPECT_TRUE(keys.contains("down-100"));
  EXPECT_TRUE(keys.contains("bulk-100000"));
  // Everything is confirmed once Kafka acknowledged it.
  const auto written = *Lsn::parse(*pg.query_value("SELECT pg_current_wal_lsn()"));
  PGOUTBOX_EXPECT_EVENTUALLY(Lsn::parse(slot_confirmed_lsn(pg.dsn(), "mx_big_slot").value_or("0/0")) >= written, 60s);
  stop(*process);
  pg.drop_slot_when_free("mx_big_slot");
}

TEST_F(VersionMatrixTest, AnIdleSlotStillAdvancesWithTheServer) {
  outbox_table("mx_idle");
  const auto cfg = config("mx_idle", {"mx_idle"});
  auto process = start(cfg, "idle.log");
  PGOUTBOX_ASSERT_EVENTUALLY(slot_active("mx_idle_slot"), 60s);
  pg.exec("CREATE TABLE mx_idle_busy (id bigserial, pad text)");
  pg.exec("INSERT INTO mx_idle_busy (pad) SELECT repeat('x', 500) FROM generate_series(1, 5000)");
  const auto written = *Lsn::parse(*pg.query_value("SELECT pg_current_wal_lsn()"));
  // No outbox row in that WAL: the keepalive replies still move the slot past it (I7).
  PGOUTBOX_EXPECT_EVENTUALLY(Lsn::parse(slot_confirmed_lsn(pg.dsn(), "mx_idle_slot").value_or("0/0")) >= written, 60s);
  stop(*process);
  pg.drop_slot_when_free("mx_idle_slot");
}

TEST_F(VersionMatrixTest, CheckNamesTheServerFeaturesAndStatusReadsTheSlot) {
  outbox_table("mx_ops");
  const auto cfg = config("mx_ops", {"mx_ops"});
  auto process = start(cfg, "ops.log");
  PGOUTBOX_ASSERT_EVENTUALLY(slot_active("mx_ops_slot"), 60s);
  stop(*process);

  const auto check = run_pgoutbox(dir.path(), {"check", "-c", cfg});
  EXPECT_EQ(check.exit_code, 0) << check.output;
  const auto version_line = line_starting(check.output, "ok    postgres version");
  EXPECT_NE(version_line.find("proto_version " + std::to_string(expected_proto())), std::string::npos) << check.output;
  EXPECT_TRUE(check.printed("ok    slot mx_ops_slot")) << check.output;

  const auto status = run_pgoutbox(dir.path(), {"status", "-c", cfg, "--json"});
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_TRUE(status.printed("\"slot\"")) << status.output;
  EXPECT_TRUE(status.printed("mx_ops_slot")) << status.output;
  EXPECT_TRUE(status.printed("\"wal_status\":\"reserved\"") || status.printed("\"wal_status\": \"reserved\""))
      << status.output;

  // The columns each major has are read (conflicting from 16, inactive_since from 17: the slot
  // was released when pgoutbox stopped); those it lacks are null.
  const bool has_conflicting = pg.server_major() >= 16;
  const bool has_17 = pg.server_major() >= 17;
  EXPECT_TRUE(status.printed(has_conflicting ? "\"conflicting\":false" : "\"conflicting\":null")) << status.output;
  EXPECT_TRUE(status.printed(has_17 ? "\"failover\":false" : "\"failover\":null")) << status.output;
  EXPECT_EQ(status.printed("\"inactive_since\":null"), !has_17) << status.output;
  EXPECT_EQ(status.printed("\"inactive_since\":\"2"), has_17) << status.output;  // a timestamp of this century
  EXPECT_EQ(check.printed(", conflicting = false"), has_conflicting) << check.output;
  EXPECT_EQ(check.printed(", inactive since "), has_17) << check.output;
  if (has_17) {
    // A slot pgoutbox made without failover_slot is not synchronised to standbys.
    EXPECT_EQ(pg.query_value("SELECT failover FROM pg_replication_slots WHERE slot_name = 'mx_ops_slot'"), "f");
  }
  pg.drop_slot_when_free("mx_ops_slot");
}

TEST_F(VersionMatrixTest, AFailoverSlotIsCreatedFrom17AndRefusedBefore) {
  outbox_table("mx_failover");
  const auto cfg = config("mx_failover", {"mx_failover"});
  const std::vector<std::string> env = {"PGOUTBOX_POSTGRES_FAILOVER_SLOT=true"};
  PgoutboxProcess process(PGOUTBOX_BINARY, cfg, dir.path() + "/failover.log", env);
  if (pg.server_major() < 17) {
    EXPECT_EQ(process.wait_exit(60s), 21) << log_of("failover.log");
    EXPECT_NE(log_of("failover.log").find("postgres.failover_slot needs PostgreSQL 17 or later"), std::string::npos)
        << log_of("failover.log");
    EXPECT_FALSE(pg.query_value("SELECT slot_name FROM pg_replication_slots WHERE slot_name = 'mx_failover_slot'"));
    const auto check = run_pgoutbox(dir.path(), {"check", "-c", cfg}, env);
    EXPECT_EQ(check.exit_code, 21) << check.output;
    EXPECT_NE(line_starting(check.output, "FAIL  postgres version: postgres.failover_slot needs PostgreSQL 17")
                  .find("Fix: set postgres.failover_slot: false"),
              std::string::npos)
        << check.output;
    return;
  }
  PGOUTBOX_ASSERT_EVENTUALLY(slot_active("mx_failover_slot"), 60s);
  EXPECT_EQ(pg.query_value("SELECT failover FROM pg_replication_slots WHERE slot_name = 'mx_failover_slot'"), "t");
  stop(process);
  const auto check = run_pgoutbox(dir.path(), {"check", "-c", cfg}, env);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_TRUE(check.printed("ok    slot mx_failover_slot: failover = true")) << check.output;
  pg.drop_slot_when_free("mx_failover_slot");

  // A slot without failover while a standby's physical slot exists: check warns what a failover loses.
  pg.exec(
      "SELECT pg_create_physical_replication_slot('mx_standby');"
      "SELECT pg_create_logical_replication_slot('mx_failover_slot', 'pgoutput')");
  const auto warned = run_pgoutbox(dir.path(), {"check", "-c", cfg});
  EXPECT_EQ(warned.exit_code, 0) << warned.output;
  EXPECT_NE(line_starting(warned.output, "WARN  slot mx_failover_slot: failover = false").find("would be lost"),
            std::string::npos)
      << warned.output;
  pg.exec("SELECT pg_drop_replication_slot('mx_standby')");
  pg.drop_slot_when_free("mx_failover_slot");
}

}  // namespace
}  // namespace pgoutbox::test
