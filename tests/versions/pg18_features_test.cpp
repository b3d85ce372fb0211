// What PostgreSQL 18 adds for a slot's client and an outbox's columns, against the major
// PGOUTBOX_TEST_PG_MAJOR names (CTest runs it on 18 and on 17): idle_replication_slot_timeout
// (check warns, status shows why the slot was invalidated, run exits 10 naming the setting) and
// a stored generated column the mapping reads (relayed on 18 through a publication pgoutbox
// creates with publish_generated_columns = stored; refused by check on 17 and by check on 18
// when the publication does not publish it). tests/versions/CMakeLists.txt registers both runs.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <sstream>

#include "../app/operator_fixture.h"
#include "eventually.h"
#include "kafka_client.h"
#include "pgoutbox_process.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

class Pg18FeaturesTest : public ::testing::Test {
 protected:
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();
  ScratchDir dir{"pg18", std::nullopt};

  static void SetUpTestSuite() {
    const auto want = requested_pg_major();
    if (!want.empty()) {
      ASSERT_EQ(std::to_string(shared_postgres().server_major()), want);
    }
  }

  bool on_18() const { return pg.server_major() >= 18; }

  std::string config(const std::string& name, const std::string& publication) {
    PgoutboxConfig c;
    c.dsn = pg.dsn();
    c.slot = name + "_slot";
    c.publication = publication;
    c.brokers = kafka.bootstrap();
    c.tables.push_back({.table = "public." + name, .topic = name + ".${aggregatetype}"});
    return write_pgoutbox_config(dir.path() + "/" + name + "-" + publication + ".yaml", c);
  }

  std::string log_of(const std::string& log) {
    std::ifstream in(dir.path() + "/" + log);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  bool slot_active(const std::string& slot) {
    return pg.query_value("SELECT active FROM pg_replication_slots WHERE slot_name = '" + slot + "'") == "t";
  }

  // idle_replication_slot_timeout is a sighup setting: the reload reaches this session's next
  // statement only once the postmaster has signalled it, so wait until it reads the new value.
  void set_idle_timeout(const std::string& value, const std::string& shown) {
    pg.exec("ALTER SYSTEM SET idle_replication_slot_timeout = '" + value + "'");  // not in a transaction block
    pg.exec("SELECT pg_reload_conf()");
    PGOUTBOX_ASSERT_EVENTUALLY(pg.query_value("SHOW idle_replication_slot_timeout") == shown, 30s);
  }

  void TearDown() override {
    if (on_18()) set_idle_timeout("0", "0");  // nothing else in this binary is invalidated
  }
};

TEST_F(Pg18FeaturesTest, IdleSlotTimeoutIsWarnedShownAndAnInvalidatedSlotExits10) {
  pg.exec(
      "CREATE TABLE px_idle (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text NOT NULL, "
      "aggregateid text, payload jsonb)");
  const auto cfg = config("px_idle", "px_idle_pub");
  if (!on_18()) {
    // 17 has no such setting: check says nothing of it.
    const auto check = run_pgoutbox(dir.path(), {"check", "-c", cfg});
    EXPECT_FALSE(check.printed("idle_replication_slot_timeout")) << check.output;
    EXPECT_TRUE(check.printed("ok    postgres version: PostgreSQL 17.")) << check.output;
    return;
  }
  {
    PgoutboxProcess process(PGOUTBOX_BINARY, cfg, dir.path() + "/idle-1.log");
    PGOUTBOX_ASSERT_EVENTUALLY(slot_active("px_idle_slot"), 60s);
    pg.exec("INSERT INTO px_idle (aggregatetype, aggregateid, payload) VALUES ('I', 'k', '{}')");
    ASSERT_EQ(read_topic(kafka.bootstrap(), "px_idle.I", 1, 60s).size(), 1U);
    process.signal(SIGTERM);
    ASSERT_EQ(process.wait_exit(30s), 0) << log_of("idle-1.log");
  }
  PGOUTBOX_ASSERT_EVENTUALLY(!slot_active("px_idle_slot"), 30s);

  // Set, and shorter than the 3 days check plans for: a warning with the fix, not a block.
  set_idle_timeout("1h", "1h");
  const auto warned = run_pgoutbox(dir.path(), {"check", "-c", cfg});
  EXPECT_EQ(warned.exit_code, 0) << warned.output;
  const auto warning = line_starting(warned.output, "WARN  idle_replication_slot_timeout: is 1h");
  EXPECT_NE(warning.find("shorter than the 3 days"), std::string::npos) << warned.output;
  EXPECT_NE(warning.find("slot px_idle_slot is idle now: the first checkpoint after 2"), std::string::npos)
      << warned.output;
  EXPECT_NE(warning.find("Fix: plan for the longest pgoutbox downtime"), std::string::npos) << warned.output;
  set_idle_timeout("4d", "4d");
  const auto long_enough = run_pgoutbox(dir.path(), {"check", "-c", cfg});
  EXPECT_NE(line_starting(long_enough.output, "ok    idle_replication_slot_timeout: is 4d"), "") << long_enough.output;

  // The minimum, 1 s: the slot has been idle longer, so the next checkpoint invalidates it.
  set_idle_timeout("1", "1s");
  ASSERT_TRUE(eventually(
      [&] {
        pg.exec("CHECKPOINT");
        return pg.query_value(
                   "SELECT invalidation_reason FROM pg_replication_slots WHERE slot_name = "
                   "'px_idle_slot'") == "idle_timeout";
      },
      60s, 500ms))
      << "the slot was never invalidated for idleness";
  set_idle_timeout("0", "0");

  const auto text = run_pgoutbox(dir.path(), {"status", "-c", cfg});
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(line_starting(text.output, "invalidation_reason").find("idle_timeout"), std::string::npos) << text.output;
  EXPECT_NE(line_starting(text.output, "inactive_since").find(" 2"), std::string::npos) << text.output;
  const auto json = run_pgoutbox(dir.path(), {"status", "-c", cfg, "--json"});
  EXPECT_TRUE(json.printed("\"invalidation_reason\":\"idle_timeout\"")) << json.output;
  EXPECT_TRUE(json.printed("\"inactive_since\":\"2")) << json.output;
  EXPECT_TRUE(json.printed("\"wal_status\":\"lost\"")) << json.output;

  const auto refused = run_pgoutbox(dir.path(), {"check", "-c", cfg});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  const auto fail =
      line_starting(refused.output, "FAIL  slot px_idle_slot: is invalidated (invalidation_reason idle_timeout)");
  EXPECT_NE(fail.find("idle_replication_slot_timeout"), std::string::npos) << refused.output;
  EXPECT_EQ(fail.find("max_slot_wal_keep_size"), std::string::npos) << refused.output;

  PgoutboxProcess run(PGOUTBOX_BINARY, cfg, dir.path() + "/idle-2.log");
  EXPECT_EQ(run.wait_exit(60s), 10) << log_of("idle-2.log");
  const auto log = log_of("idle-2.log");
  EXPECT_NE(log.find("invalidation_reason idle_timeout"), std::string::npos) << log;
  EXPECT_NE(log.find("raise idle_replication_slot_timeout"), std::string::npos) << log;
  EXPECT_NE(log.find("pgoutbox slot drop -c FILE --yes"), std::string::npos) << log;
  pg.drop_slot_when_free("px_idle_slot");
}

TEST_F(Pg18FeaturesTest, AGeneratedRoutingColumnIsRelayedOn18AndRefusedWhereItCannotBe) {
  // The routing value is computed from the payload: a stored generated column.
  pg.exec(
      "CREATE TABLE px_gen (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregateid text, payload jsonb, "
      "aggregatetype text GENERATED ALWAYS AS (payload->>'kind') STORED)");
  const auto cfg = config("px_gen", "px_gen_pub");
  const auto check = run_pgoutbox(dir.path(), {"check", "-c", cfg});
  if (!on_18()) {
    EXPECT_EQ(check.exit_code, 1) << check.output;
    const auto fail = line_starting(check.output,
                                    "FAIL  table public.px_gen: column \"aggregatetype\" (the topic "
                                    "template reference) is a generated column, and PostgreSQL 17.");
    EXPECT_NE(fail.find("never publishes generated columns"), std::string::npos) << check.output;
    EXPECT_NE(fail.find("Fix: make \"aggregatetype\" an ordinary column"), std::string::npos) << check.output;
    // run refuses the same mapping before it creates anything (exit 17), in check's words.
    PgoutboxProcess run(PGOUTBOX_BINARY, cfg, dir.path() + "/gen-17.log");
    EXPECT_EQ(run.wait_exit(60s), 17) << log_of("gen-17.log");
    EXPECT_NE(log_of("gen-17.log").find("never publishes generated columns"), std::string::npos)
        << log_of("gen-17.log");
    EXPECT_FALSE(pg.query_value("SELECT slot_name FROM pg_replication_slots WHERE slot_name = 'px_gen_slot'"));
    return;
  }
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(line_starting(check.output,
                          "ok    table public.px_gen: column \"aggregatetype\" (the topic template "
                          "reference) is a stored generated column, which pgoutbox publishes"),
            "")
      << check.output;
  {
    PgoutboxProcess process(PGOUTBOX_BINARY, cfg, dir.path() + "/gen-18.log");
    PGOUTBOX_ASSERT_EVENTUALLY(slot_active("px_gen_slot"), 60s);
    EXPECT_EQ(pg.query_value("SELECT pubgencols FROM pg_publication WHERE pubname = 'px_gen_pub'"), "s");
    pg.exec("INSERT INTO px_gen (aggregateid, payload) VALUES ('o-1', '{\"kind\": \"Order\", \"total\": 9}')");
    const auto got = read_topic(kafka.bootstrap(), "px_gen.Order", 1, 60s);
    ASSERT_EQ(got.size(), 1U) << log_of("gen-18.log");
    EXPECT_EQ(got[0].key, "o-1");
    EXPECT_EQ(got[0].value, "{\"kind\": \"Order\", \"total\": 9}");
    process.signal(SIGTERM);
    EXPECT_EQ(process.wait_exit(30s), 0) << log_of("gen-18.log");
  }
  pg.drop_slot_when_free("px_gen_slot");

  // A publication made without the option leaves the column out: check refuses it, with the fix.
  pg.exec("CREATE PUBLICATION px_gen_plain FOR TABLE px_gen WITH (publish = 'insert')");
  const auto plain = run_pgoutbox(dir.path(), {"check", "-c", config("px_gen", "px_gen_plain")});
  EXPECT_EQ(plain.exit_code, 1) << plain.output;
  const auto fail = line_starting(plain.output,
                                  "FAIL  table public.px_gen: column \"aggregatetype\" (the topic "
                                  "template reference) is a stored generated column that publication "
                                  "px_gen_plain does not publish");
  EXPECT_NE(fail.find("Fix: ALTER PUBLICATION \"px_gen_plain\" SET (publish_generated_columns = stored);"),
            std::string::npos)
      << plain.output;
  pg.exec("ALTER PUBLICATION \"px_gen_plain\" SET (publish_generated_columns = stored)");
  const auto fixed = run_pgoutbox(dir.path(), {"check", "-c", config("px_gen", "px_gen_plain")});
  EXPECT_EQ(fixed.exit_code, 0) << fixed.output;
  EXPECT_TRUE(fixed.printed("which publication px_gen_plain publishes")) << fixed.output;
}

}  // namespace
}  // namespace pgoutbox::test
