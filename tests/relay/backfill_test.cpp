// Backfill at slot creation (issue 15 item 1) against a real PostgreSQL and Kafka: rows committed
// before the slot come from its exported snapshot, rows after it from the stream, each once.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>

#include "eventually.h"
#include "kafka_client.h"
#include "relay_config.h"
#include "relay_runner.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

class BackfillTest : public ::testing::Test {
 protected:
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();

  // The seeds' local message table: status NEW until a poller marks it SENT.
  config::Config message_table(const std::string& name) {
    pg.exec("CREATE TABLE " + name +
            " (id bigserial PRIMARY KEY, aggregatetype text NOT NULL DEFAULT 'Order', aggregateid text, "
            "payload jsonb, status text NOT NULL DEFAULT 'NEW', retries int NOT NULL DEFAULT 0)");
    auto cfg = relay_config(pg.dsn(), kafka.bootstrap(), name);
    cfg.tables[0].backfill.where = "status = 'NEW'";
    cfg.tables[0].backfill.chunk_rows = 100;
    slots_.push_back(cfg.postgres.slot);
    return cfg;
  }

  void insert_rows(const std::string& table, int n, const std::string& status = "NEW") {
    pg.exec(fmt::format(
        "INSERT INTO {} (aggregateid, payload, status) SELECT 'k' || g, jsonb_build_object('n', g), '{}' FROM "
        "generate_series(1, {}) g",
        table, status, n));
  }

  // How many records of the topic carry each event id.
  std::map<std::string, int> ids_in(const std::string& topic, std::size_t expected) {
    std::map<std::string, int> out;
    for (const auto& r : read_topic(kafka.bootstrap(), topic, expected, 60s)) ++out[r.header("id").value_or("")];
    return out;
  }

  bool slot_exists(const std::string& slot) {
    return pg.query_value("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot + "'") == "1";
  }

  void TearDown() override {
    for (const auto& slot : slots_) {
      pg.drop_slot_when_free(slot);
      pg.drop_slot_when_free(slot + "_backfilling");
      pg.drop_slot_when_free(slot + "_backfilled");
    }
  }

  std::vector<std::string> slots_;
};

// A writer inserts NEW rows all along, from before the slot exists until after streaming began:
// each of them, and each NEW row written earlier, reaches Kafka exactly once; SENT rows never.
TEST_F(BackfillTest, RowsBeforeTheSlotFromTheSnapshotRowsAfterFromTheStreamEachOnce) {
  auto cfg = message_table("bf_once");
  create_topic(kafka.bootstrap(), "bf_once.Order", 3);
  insert_rows("bf_once", 1500);
  insert_rows("bf_once", 300, "SENT");
  std::atomic<bool> writing{true};
  std::atomic<int> written{0};
  std::thread writer([&] {
    auto conn = pg.connect();
    while (writing) {
      exec_on(conn.get(), "INSERT INTO bf_once (aggregateid, payload) VALUES ('w', '{}')");
      ++written;
    }
  });
  PGOUTBOX_ASSERT_EVENTUALLY(written.load() > 50, 30s);
  RelayRunner relay(cfg);
  {
    ASSERT_FALSE(relay.done()) << relay.outcome().reason;
    const int at_streaming = written.load();
    PGOUTBOX_ASSERT_EVENTUALLY(written.load() > at_streaming + 200, 30s);
    writing = false;
    writer.join();
  }
  const auto expected = std::stoull(*pg.query_value("SELECT count(*) FROM bf_once WHERE status = 'NEW'"));
  // Read while the relay still streams: the writer's last rows may not have reached it yet.
  const auto ids = ids_in("bf_once.Order", expected);
  relay.stop();
  EXPECT_EQ(ids.size(), expected);
  int doubled = 0;
  for (const auto& [id, n] : ids) doubled += n > 1 ? 1 : 0;
  EXPECT_EQ(doubled, 0);
  const auto rows = pg.query("SELECT id::text, status FROM bf_once");
  int lost = 0;
  int sent_published = 0;
  for (const auto& row : rows) {
    const bool published = ids.count(*row[0]) != 0;
    if (*row[1] == "NEW" && !published) ++lost;
    if (*row[1] == "SENT" && published) ++sent_published;
  }
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(sent_published, 0);
  EXPECT_TRUE(slot_exists(cfg.postgres.slot + "_backfilled"));
  EXPECT_FALSE(slot_exists(cfg.postgres.slot + "_backfilling"));
}

// A restart of a slot whose backfill finished streams on and backfills nothing again.
TEST_F(BackfillTest, AFinishedBackfillIsNotRepeated) {
  auto cfg = message_table("bf_again");
  insert_rows("bf_again", 250);
  {
    RelayRunner relay(cfg);
    ASSERT_FALSE(relay.done()) << relay.outcome().reason;
  }
  {
    RelayRunner relay(cfg);
    ASSERT_FALSE(relay.done()) << relay.outcome().reason;
    insert_rows("bf_again", 1);
    PGOUTBOX_ASSERT_EVENTUALLY(relay.counters().records_acked >= 1U, 30s);
    EXPECT_EQ(relay.counters().records_acked, 1U);
  }
  EXPECT_EQ(ids_in("bf_again.Order", 251).size(), 251U);
}

// Stopped in the middle of the backfill (few rows in flight, small chunks), the next start drops
// the slot and backfills again from the start: no row is lost.
TEST_F(BackfillTest, AnInterruptedBackfillStartsAgainWithoutLosingRows) {
  auto cfg = message_table("bf_restart");
  cfg.tables[0].backfill.chunk_rows = 10;
  cfg.limits.max_in_flight_records = 10;
  insert_rows("bf_restart", 3000);
  {
    relay::Session session(cfg);
    std::thread stopper([&] {
      // Stops once some rows are out, long before 3000 are.
      while (read_topic(kafka.bootstrap(), "bf_restart.Order", 1, 1s).empty()) std::this_thread::sleep_for(10ms);
      boost::asio::post(session.io(), [&] { session.stop(); });
    });
    const auto outcome = session.run();
    stopper.join();
    EXPECT_EQ(outcome.kind, relay::Outcome::Kind::stopped) << outcome.reason;
    EXPECT_FALSE(session.streamed());
  }
  const auto first = ids_in("bf_restart.Order", 1).size();
  EXPECT_LT(first, 3000U);
  EXPECT_TRUE(slot_exists(cfg.postgres.slot + "_backfilling"));
  EXPECT_FALSE(slot_exists(cfg.postgres.slot + "_backfilled"));
  insert_rows("bf_restart", 5);  // after the first slot: only the second slot's snapshot has them
  cfg.limits.max_in_flight_records = 20'000;
  {
    RelayRunner relay(cfg);
    ASSERT_FALSE(relay.done()) << relay.outcome().reason;
  }
  const auto ids = ids_in("bf_restart.Order", 3005);
  EXPECT_EQ(ids.size(), 3005U);
  EXPECT_TRUE(slot_exists(cfg.postgres.slot + "_backfilled"));
  EXPECT_FALSE(slot_exists(cfg.postgres.slot + "_backfilling"));
}

TEST_F(BackfillTest, APredicateThatIsNotSqlForTheTableIsRefusedBeforeTheSlotExists) {
  auto cfg = message_table("bf_bad");
  cfg.tables[0].backfill.where = "no_such_column = 1";
  relay::Session session(cfg);
  const auto outcome = session.run();
  EXPECT_EQ(outcome.kind, relay::Outcome::Kind::fatal);
  EXPECT_EQ(outcome.cause, relay::Fatal::mapping);
  EXPECT_NE(outcome.reason.find("no_such_column"), std::string::npos) << outcome.reason;
  EXPECT_NE(outcome.reason.find("backfill.where"), std::string::npos) << outcome.reason;
  EXPECT_FALSE(slot_exists(cfg.postgres.slot));
}

TEST_F(BackfillTest, ABackfillForASlotThatAlreadyExistsIsRefusedNamingRepublish) {
  auto cfg = message_table("bf_late");
  pg.exec("SELECT pg_create_logical_replication_slot('" + cfg.postgres.slot + "', 'pgoutput')");
  pg.exec("CREATE PUBLICATION " + cfg.postgres.publication + " FOR TABLE bf_late WITH (publish = 'insert')");
  relay::Session session(cfg);
  const auto outcome = session.run();
  EXPECT_EQ(outcome.kind, relay::Outcome::Kind::fatal);
  EXPECT_EQ(outcome.cause, relay::Fatal::slot_unusable);
  EXPECT_NE(outcome.reason.find("pgoutbox republish"), std::string::npos) << outcome.reason;
}

}  // namespace
}  // namespace pgoutbox::test
