// Per-key order around a failed record (docs/spec.md I4), end to end: real PostgreSQL 15 →
// relay → real Kafka 4. A record the broker refuses for its timestamp takes its batch with it;
// the records behind it in its topic wait until it is settled, then follow in their order.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "eventually.h"
#include "kafka_client.h"
#include "relay_runner.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

class OrderTest : public ::testing::Test {
 protected:
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();
  void TearDown() override {
    for (const auto& slot : slots_) pg.drop_slot_when_free(slot);
  }
  std::vector<std::string> slots_;
};

// Issue 12 #11. The topic accepts timestamps at most 1 s ahead of the broker's clock; p's is 3 s
// ahead, so its batch (a01, p, a02) is refused with INVALID_TIMESTAMP, and p alone is refused
// again until the clock catches up, a few retries later. a03..a30 of the same key are written
// meanwhile. Key A must be read a00, a01, p, a02, a03, …, a30: before the hold, a03.. went ahead
// of p. p keeps its mapped timestamp when sent again (it was sent again without one, and taken).
//
// The producer is warmed up first (a00 acknowledged) and a03 written 200 ms after the refusal's
// batch, so the refusal is reported before a03 is read: records librdkafka was already given
// when it came cannot be recalled and may land before a01's second send (the documented limit).
TEST_F(OrderTest, AnInvalidTimestampHoldsTheLaterRecordsOfItsKeyUntilItIsSettled) {
  const std::string name = "order_ts";
  pg.exec("CREATE TABLE " + name +
          " (id text PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text, payload text, ts timestamptz)");
  create_topic(kafka.bootstrap(), name + ".E", 1,
               {{"message.timestamp.type", "CreateTime"}, {"message.timestamp.after.max.ms", "1000"}});
  config::Config cfg;
  cfg.postgres.dsn = pg.dsn();
  cfg.postgres.slot = name + "_slot";
  cfg.postgres.publication = name + "_pub";
  cfg.postgres.create_publication = true;
  cfg.postgres.status_interval = 200ms;
  cfg.kafka.brokers = kafka.bootstrap();
  config::TableConfig t;
  t.name = name;
  t.topic = name + ".${aggregatetype}";
  t.columns.timestamp = "ts";
  cfg.tables.push_back(t);
  cfg.poison.policy = config::PoisonPolicy::dead_letter;
  cfg.poison.dead_letter_topic = name + ".dlq";
  cfg.poison.max_retries = 10;
  cfg.poison.retry_backoff = 200ms;
  cfg.reconnect.max = 1s;
  cfg.shutdown_timeout = 10s;
  slots_.push_back(cfg.postgres.slot);

  RelayRunner relay(cfg);
  pg.exec("INSERT INTO " + name + " VALUES ('a00', 'E', 'A', '{}', now())");
  ASSERT_EQ(read_topic(kafka.bootstrap(), name + ".E", 1, 60s).size(), 1U);
  pg.exec("INSERT INTO " + name +
          " VALUES ('a01', 'E', 'A', '{}', now()), "
          "('p', 'E', 'A', '{}', clock_timestamp() + interval '3 seconds'), ('a02', 'E', 'A', '{}', now())");
  std::this_thread::sleep_for(200ms);  // the refusal is reported meanwhile
  for (int i = 3; i <= 30; ++i) {
    pg.exec(fmt::format("INSERT INTO {} VALUES ('a{:02d}', 'E', 'A', '{{}}', now())", name, i));
    std::this_thread::sleep_for(20ms);
  }
  PGOUTBOX_ASSERT_EVENTUALLY(relay.counters().records_acked + relay.counters().dead_lettered == 32U, 60s);
  std::vector<std::string> ids;
  std::int64_t p_timestamp = -1;
  for (const auto& r : read_topic(kafka.bootstrap(), name + ".E", 32, 10s)) {
    ids.push_back(r.header("id").value_or("?"));
    if (ids.back() == "p") p_timestamp = r.timestamp_ms;
  }
  std::vector<std::string> expected;
  for (int i = 0; i <= 30; ++i) expected.push_back(fmt::format("a{:02d}", i));
  const auto p = std::find(ids.begin(), ids.end(), "p");
  if (p != ids.end()) {
    EXPECT_EQ(p - ids.begin(), 2) << "p is not in its place";
    EXPECT_GT(p_timestamp, 0) << "p lost its mapped timestamp";
    ids.erase(p);
  } else {
    EXPECT_EQ(relay.counters().dead_lettered, 1U);
  }
  EXPECT_EQ(ids, expected);
  EXPECT_FALSE(relay.done()) << relay.outcome().reason;
}

}  // namespace
}  // namespace pgoutbox::test
