// stock-consumer as a process against real Postgres and Kafka: each record's outcome (applied,
// duplicate skipped, rejected, dead-lettered, retried), seen where a user would look: the stock
// database, the side topics, the consumer's counters.
#include <gtest/gtest.h>
#include <signal.h>

#include "eventually.h"
#include "example_fixture.h"
#include "kafka_client.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

class StockConsumerTest : public ::testing::Test {
 protected:
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();
  ScratchDir dir{"stock-consumer-test", std::nullopt};
  std::string name;  // per test: database, topics and group carry it
  std::string db, topic, dlq, rejected, stats;
  ChildProcess consumer;

  void SetUp() override {
    // Short: the group name lands in consumer_log.consumer, a varchar(64).
    static int tests = 0;
    name = "case" + std::to_string(++tests);
    db = "stock_" + name;
    topic = "orders." + name;
    dlq = "dlq." + name;
    rejected = "rejected." + name;
    stats = dir.path() + "/consumer.stats";
    create_database(pg, db, {"examples/sql/stock.sql", "sql/consumer_log.sql"});
    pg.exec("INSERT INTO stock (sku, initial, available) VALUES ('SKU-1', 10, 10)", db);
    create_topic(kafka.bootstrap(), topic, 1);
    consumer =
        ChildProcess({.argv = {STOCK_CONSUMER_BINARY, "--brokers", kafka.bootstrap(), "--dsn", pg.dsn(db), "--topic",
                               topic, "--group", "stock-" + name, "--dlq-topic", dlq, "--reject-topic", rejected,
                               "--backoff", "200ms,500ms,1s,2s,4s,8s", "--stats-file", stats},
                      .log_path = dir.path() + "/consumer.log",
                      .run_as = std::nullopt,
                      .extra_env = {}});
  }

  void TearDown() override {
    if (consumer.pid() > 0) {
      EXPECT_EQ(stop_gracefully(consumer, 30s), 0) << read_text(dir.path() + "/consumer.log");
    }
  }

  void order_event(const std::string& id, int order_id, int quantity, const std::string& sku = "SKU-1") {
    produce(kafka.bootstrap(), topic, sku,
            R"({"order_id": )" + std::to_string(order_id) + R"(, "sku": ")" + sku + R"(", "quantity": )" +
                std::to_string(quantity) + "}",
            {{"id", id}, {"type", "OrderCreated"}});
  }
  std::string available() {
    return pg.query_value("SELECT available FROM stock WHERE sku = 'SKU-1'", db).value_or("?");
  }
  std::string count(const std::string& table) { return *pg.query_value("SELECT count(*) FROM " + table, db); }
  std::int64_t handled() { return stat_value(stats, "handled"); }
};

TEST_F(StockConsumerTest, ADuplicateDeliveryIsSkippedByConsumerLog) {
  order_event("event-a", 1, 2);
  order_event("event-a", 1, 2);  // the same event again, as at-least-once delivery may bring it
  order_event("event-b", 2, 1);
  PGOUTBOX_ASSERT_EVENTUALLY(handled() == 3, 60s);
  EXPECT_EQ(available(), "7") << "the duplicate reserved stock a second time";
  EXPECT_EQ(count("consumer_log"), "2");
  EXPECT_EQ(count("stock_movements"), "2");
  EXPECT_EQ(stat_value(stats, "applied"), 2);
  EXPECT_EQ(stat_value(stats, "duplicates"), 1);
}

TEST_F(StockConsumerTest, AMalformedRecordGoesToTheDeadLetterTopicAndTheNextOneIsApplied) {
  produce(kafka.bootstrap(), topic, "SKU-1", std::string("{not json"), {{"id", "poison-1"}});
  order_event("event-ok", 1, 1);
  PGOUTBOX_ASSERT_EVENTUALLY(handled() == 2, 60s);
  const auto dead = read_topic(kafka.bootstrap(), dlq, 1, 30s);
  ASSERT_EQ(dead.size(), 1U);
  EXPECT_EQ(dead[0].value, "{not json") << "the original value, unchanged";
  EXPECT_EQ(dead[0].key, "SKU-1");
  EXPECT_EQ(dead[0].header("id"), "poison-1");
  EXPECT_NE(dead[0].header("dlq.error").value_or("").find("malformed"), std::string::npos);
  EXPECT_EQ(dead[0].header("dlq.topic"), topic);
  EXPECT_EQ(dead[0].header("dlq.offset"), "0");
  EXPECT_EQ(stat_value(stats, "dead_lettered"), 1);
  EXPECT_EQ(stat_value(stats, "retries"), 0) << "a malformed record cannot parse on a retry";
  EXPECT_EQ(available(), "9");
  EXPECT_EQ(count("consumer_log"), "1");
}

TEST_F(StockConsumerTest, InsufficientStockIsRejectedWithACompensatingEventNotRetried) {
  order_event("event-big", 7, 11);
  PGOUTBOX_ASSERT_EVENTUALLY(handled() == 1, 60s);
  const auto events = read_topic(kafka.bootstrap(), rejected, 1, 30s);
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events[0].header("type"), "StockRejected");
  EXPECT_EQ(events[0].header("reason"), "insufficient stock");
  EXPECT_EQ(events[0].header("causation_id"), "event-big");
  EXPECT_EQ(events[0].key, "SKU-1");
  EXPECT_EQ(available(), "10");
  EXPECT_EQ(*pg.query_value("SELECT outcome || ' ' || order_id FROM stock_movements", db), "rejected 7");
  EXPECT_EQ(stat_value(stats, "rejected"), 1);
  EXPECT_EQ(stat_value(stats, "retries"), 0);
  EXPECT_EQ(read_topic(kafka.bootstrap(), dlq, 0, 2s).size(), 0U);
}

TEST_F(StockConsumerTest, ADatabaseOutageIsRetriedWithBackoffAndAppliedOnce) {
  order_event("event-1", 1, 1);
  PGOUTBOX_ASSERT_EVENTUALLY(handled() == 1, 60s);
  pg.stop();
  order_event("event-2", 2, 3);
  const bool retried = eventually([&] { return stat_value(stats, "retries") >= 2; }, 30s);
  pg.start();
  ASSERT_TRUE(retried) << read_text(dir.path() + "/consumer.log");
  PGOUTBOX_ASSERT_EVENTUALLY(handled() == 2, 60s);
  EXPECT_EQ(available(), "6");
  EXPECT_EQ(stat_value(stats, "applied"), 2);
  EXPECT_EQ(stat_value(stats, "dead_lettered"), 0);
}

}  // namespace
}  // namespace pgoutbox::test
