// outbox-poller alone, the real binary on the harness's Postgres and Kafka: what it publishes
// for a row (pgoutbox's mapping plus its relay header), and what it does with a row Kafka refuses.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <thread>

#include "eventually.h"
#include "example_fixture.h"
#include "kafka_client.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

TEST(OutboxPollerTest, PublishesAndMarksSentCountsRetriesOnARefusedRowAndStopsAtTheCap) {
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();
  ScratchDir dir{"outbox-poller-test", std::nullopt};
  const std::string shop = "shop_poller";
  create_database(pg, shop, {"examples/sql/local_message.sql"});
  create_topic(kafka.bootstrap(), "poller.event.order", 1);
  const auto good = *pg.query_value(
      "INSERT INTO local_message (aggregatetype, aggregateid, type, payload) "
      "VALUES ('order', 'SKU-1', 'OrderCreated', '{\"order_id\": 1}') RETURNING id",
      shop);
  // No topic can be named "poller.event.not a topic!": every publish of this row fails.
  const auto refused = *pg.query_value(
      "INSERT INTO local_message (aggregatetype, aggregateid, type, payload) "
      "VALUES ('not a topic!', 'SKU-2', 'OrderCreated', '{}') RETURNING id",
      shop);

  ChildProcess poller({.argv = {OUTBOX_POLLER_BINARY, "--dsn", pg.dsn(shop), "--brokers", kafka.bootstrap(),
                                "--topic-prefix", "poller.event.", "--interval", "100ms", "--max-retries", "3",
                                "--delivery-timeout", "2s", "--stats-file", dir.path() + "/poller.stats"},
                       .log_path = dir.path() + "/poller.log",
                       .run_as = std::nullopt,
                       .extra_env = {}});
  const auto row = [&](const std::string& id) {
    return *pg.query_value("SELECT status || ' ' || retries FROM local_message WHERE id = '" + id + "'", shop);
  };
  PGOUTBOX_ASSERT_EVENTUALLY(row(good) == "SENT 0", 30s);
  PGOUTBOX_ASSERT_EVENTUALLY(row(refused) == "NEW 3", 60s);
  // At the cap the row is no longer claimed: it waits as NEW for an operator (or a backfill).
  // Ten more polls' time, to see none of them count a retry.
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(row(refused), "NEW 3");
  EXPECT_EQ(stat_value(dir.path() + "/poller.stats", "published"), 1);
  EXPECT_EQ(stat_value(dir.path() + "/poller.stats", "failed"), 3);
  EXPECT_EQ(stop_gracefully(poller, 30s), 0) << read_text(dir.path() + "/poller.log");

  const auto records = read_topic(kafka.bootstrap(), "poller.event.order", 1, 30s);
  ASSERT_EQ(records.size(), 1U);
  EXPECT_EQ(records[0].key, "SKU-1");
  EXPECT_EQ(records[0].value, "{\"order_id\": 1}");
  EXPECT_EQ(records[0].header("id"), good);
  EXPECT_EQ(records[0].header("type"), "OrderCreated");
  EXPECT_EQ(records[0].header("relay"), "outbox-poller");
}

}  // namespace
}  // namespace pgoutbox::test
