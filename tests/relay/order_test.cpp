// Per-key order around a failed record (docs/spec.md I4), end to end: real PostgreSQL 15 →
// relay → real Kafka 4. A record the broker refuses (for its timestamp, for a missing key on a
// compacted topic) takes its batch with it; the records behind it in its topic wait until it is
// settled, then follow in their order.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "eventually.h"
#include "kafka_client.h"
#include "relay_config.h"
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

  // The relay for outbox table `name` (created by the caller) to topics
  // `<name>.${aggregatetype}`: a record Kafka refuses is sent again up to 10 times, 200 ms
  // apart, then dead-lettered to `<name>.dlq`.
  config::Config order_config(const std::string& name) {
    auto cfg = test::relay_config(pg.dsn(), kafka.bootstrap(), name);
    cfg.poison.policy = config::PoisonPolicy::dead_letter;
    cfg.poison.dead_letter_topic = name + ".dlq";
    cfg.poison.max_retries = 10;
    cfg.poison.retry_backoff = 200ms;
    cfg.reconnect.max = 1s;
    slots_.push_back(cfg.postgres.slot);
    return cfg;
  }

  // The rows around a refusal, in the order that makes it observable: `warm` acknowledged first
  // (the producer warmed up), then `refused_batch` in one transaction, then, 200 ms later (the
  // refusal is reported meanwhile), each of `later` in a transaction of its own, 20 ms apart.
  // Records librdkafka was already given when the refusal came cannot be recalled and may land
  // before the batch's second send (the documented limit). Each string is a VALUES row list.
  void write_around_refusal(const std::string& name, const std::string& topic, const std::string& warm,
                            const std::string& refused_batch, const std::vector<std::string>& later) {
    pg.exec("INSERT INTO " + name + " VALUES " + warm);
    ASSERT_EQ(read_topic(kafka.bootstrap(), topic, 1, 60s).size(), 1U);
    pg.exec("INSERT INTO " + name + " VALUES " + refused_batch);
    std::this_thread::sleep_for(200ms);
    for (const auto& row : later) {
      pg.exec("INSERT INTO " + name + " VALUES " + row);
      std::this_thread::sleep_for(20ms);
    }
  }

  // The first `count` records of `topic` in offset order, by their "id" header.
  std::vector<std::string> ids_in(const std::string& topic, std::size_t count) {
    std::vector<std::string> ids;
    for (const auto& r : read_topic(kafka.bootstrap(), topic, count, 10s)) ids.push_back(r.header("id").value_or("?"));
    return ids;
  }

  std::vector<std::string> slots_;
};

// Issue 12 #11. The topic accepts timestamps at most 1 s ahead of the broker's clock; p's is 3 s
// ahead, so its batch (a01, p, a02) is refused with INVALID_TIMESTAMP, and p alone is refused
// again until the clock catches up, a few retries later. a03..a30 of the same key are written
// meanwhile. Key A must be read a00, a01, p, a02, a03, …, a30: before the hold, a03.. went ahead
// of p; now the producer stops at the refused batch and the next session sends a01, p and a02
// alone, in their places. p keeps its mapped timestamp when sent again (it was sent again without
// one, and taken).
// The rows are written around the refusal as write_around_refusal says.
TEST_F(OrderTest, AnInvalidTimestampHoldsTheLaterRecordsOfItsKeyUntilItIsSettled) {
  const std::string name = "order_ts";
  pg.exec("CREATE TABLE " + name +
          " (id text PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text, payload text, ts timestamptz)");
  create_topic(kafka.bootstrap(), name + ".E", 1,
               {{"message.timestamp.type", "CreateTime"}, {"message.timestamp.after.max.ms", "1000"}});
  auto cfg = order_config(name);
  cfg.tables.front().columns.timestamp = "ts";

  RelayRunner relay(cfg);
  std::vector<std::string> later;
  for (int i = 3; i <= 30; ++i) later.push_back(fmt::format("('a{:02d}', 'E', 'A', '{{}}', now())", i));
  write_around_refusal(
      name, name + ".E", "('a00', 'E', 'A', '{}', now())",
      "('a01', 'E', 'A', '{}', now()), ('p', 'E', 'A', '{}', clock_timestamp() + interval '3 seconds'), "
      "('a02', 'E', 'A', '{}', now())",
      later);
  // Every row handled: the slot confirms past the last one. The refused batch ends a session (the
  // producer stops at it, docs/spec.md I4) and the next one publishes the unconfirmed rows again:
  // what counts is each id's first copy.
  const auto last = *pg.query_value("SELECT pg_current_wal_lsn()");
  PGOUTBOX_ASSERT_EVENTUALLY(
      pg.query_value("SELECT confirmed_flush_lsn >= '" + last + "' FROM pg_replication_slots WHERE slot_name = '" +
                     cfg.postgres.slot + "'") == std::optional<std::string>("t"),
      60s);
  std::vector<std::string> ids;
  std::int64_t p_timestamp = -1;
  for (const auto& r : read_topic(kafka.bootstrap(), name + ".E", 32, 10s)) {
    const auto id = r.header("id").value_or("?");
    if (std::find(ids.begin(), ids.end(), id) != ids.end()) continue;
    ids.push_back(id);
    if (id == "p") p_timestamp = r.timestamp_ms;
  }
  std::vector<std::string> expected;
  for (int i = 0; i <= 30; ++i) expected.push_back(fmt::format("a{:02d}", i));
  const auto p = std::find(ids.begin(), ids.end(), "p");
  if (p != ids.end()) {
    EXPECT_EQ(p - ids.begin(), 2) << "p is not in its place";
    EXPECT_GT(p_timestamp, 0) << "p lost its mapped timestamp";
    ids.erase(p);
  } else {
    EXPECT_EQ(read_topic(kafka.bootstrap(), name + ".dlq", 1, 10s).size(), 1U);
  }
  EXPECT_EQ(ids, expected);
  EXPECT_FALSE(relay.done()) << relay.outcome().reason;
}

// Issue 12 #11. A compacted topic refuses a record without a key (INVALID_RECORD), and with it
// the batch it came in: a01, b01, n (aggregateid NULL), a02, b02, one transaction, one
// partition. The other records are sent again alone, and a03..a20 and b03..b20, written
// meanwhile, wait behind them: per key, the topic holds a00..a20 and b01..b20 in order. n can
// never be taken; the poison policy dead-letters it.
TEST_F(OrderTest, ANullKeyOnACompactedTopicHoldsTheLaterRecordsOfTheOtherKeysInTheirOrder) {
  const std::string name = "order_nullkey";
  pg.exec("CREATE TABLE " + name +
          " (id text PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text, payload text)");
  create_topic(kafka.bootstrap(), name + ".E", 1, {{"cleanup.policy", "compact"}});
  RelayRunner relay(order_config(name));
  std::vector<std::string> later;
  for (int i = 3; i <= 20; ++i) {
    later.push_back(fmt::format("('a{:02d}', 'E', 'A', '{{}}')", i));
    later.push_back(fmt::format("('b{:02d}', 'E', 'B', '{{}}')", i));
  }
  write_around_refusal(name, name + ".E", "('a00', 'E', 'A', '{}')",
                       "('a01', 'E', 'A', '{}'), ('b01', 'E', 'B', '{}'), ('n', 'E', NULL, '{}'), "
                       "('a02', 'E', 'A', '{}'), ('b02', 'E', 'B', '{}')",
                       later);
  PGOUTBOX_ASSERT_EVENTUALLY(relay.counters().records_acked + relay.counters().dead_lettered == 42U, 60s);
  EXPECT_EQ(relay.counters().dead_lettered, 1U);
  std::vector<std::string> a;
  std::vector<std::string> b;
  for (const auto& id : ids_in(name + ".E", 41)) (id[0] == 'a' ? a : b).push_back(id);
  std::vector<std::string> expected_a;
  std::vector<std::string> expected_b;
  for (int i = 0; i <= 20; ++i) expected_a.push_back(fmt::format("a{:02d}", i));
  for (int i = 1; i <= 20; ++i) expected_b.push_back(fmt::format("b{:02d}", i));
  EXPECT_EQ(a, expected_a);
  EXPECT_EQ(b, expected_b);
  EXPECT_EQ(ids_in(name + ".dlq", 1), std::vector<std::string>{"n"});
  EXPECT_FALSE(relay.done()) << relay.outcome().reason;
}

}  // namespace
}  // namespace pgoutbox::test
