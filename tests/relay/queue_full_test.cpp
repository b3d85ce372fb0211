// Issue 12 #6 against a real PostgreSQL and a real Kafka: librdkafka's queue full while the
// broker is down. The relay's in-flight caps let it hand over records up to the cap plus the one
// that crosses it; with librdkafka's queue the size of the byte cap, that one meets QUEUE_FULL,
// and the relay keeps it and retries on a timer. Meanwhile the io thread goes on: status updates
// keep a 2 s wal_sender_timeout from ending the session, and a graceful stop is honoured. Once
// the broker is back, every row reaches Kafka in order and the slot moves past them.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <thread>

#include "eventually.h"
#include "kafka_client.h"
#include "relay_config.h"
#include "relay_runner.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(QueueFull, AFullProducerQueueStopsNeitherStatusUpdatesNorAStopAndLosesNothing) {
  constexpr int kRows = 20;               // of ~300 KB each: 6 MB, six times the queue
  constexpr auto kWalSenderTimeout = 2s;  // the server ends a silent session after this
  constexpr auto kFullFor = 4 * kWalSenderTimeout;
  const std::string name = "qfull";
  PgCluster pg(std::map<std::string, std::string>{{"wal_sender_timeout", "2s"}});
  KafkaBroker& kafka = shared_kafka();
  pg.exec("CREATE TABLE " + name +
          " (id text PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text, payload text)");
  create_topic(kafka.bootstrap(), name + ".E", 1);

  auto cfg = relay_config(pg.dsn(), kafka.bootstrap(), name);
  cfg.postgres.status_interval = 500ms;
  // The loader refuses a queue smaller than the caps, so the caps come down with it.
  cfg.limits.max_in_flight_records = 1000;
  cfg.limits.max_in_flight_bytes = 1024 * 1024;
  cfg.kafka.properties = {{"queue.buffering.max.messages", "1000"}, {"queue.buffering.max.kbytes", "1024"}};
  cfg.reconnect.max = 1s;
  cfg.shutdown_timeout = 3s;
  const auto rows = [&](int from, int to) {
    for (int i = from; i <= to; ++i) {
      pg.exec(fmt::format("INSERT INTO {} VALUES ('r{:02d}', 'E', 'K', repeat('x', 300000))", name, i));
    }
  };
  const auto walsender = [&] {
    return pg.query_value("SELECT active_pid FROM pg_replication_slots WHERE slot_name = '" + cfg.postgres.slot + "'");
  };

  {
    RelayRunner relay(cfg);
    rows(0, 0);
    ASSERT_EQ(read_topic(kafka.bootstrap(), name + ".E", 1, 60s).size(), 1U);
    const auto pid = walsender();
    ASSERT_TRUE(pid.has_value());
    kafka.stop();
    rows(1, kRows);
    // The queue is full within a second of the burst, and stays full: the broker is down. The
    // same walsender throughout means the server never went wal_sender_timeout without hearing
    // from the relay. (An io thread blocked on the queue would also never answer counters():
    // the test's TIMEOUT is the verdict then.)
    const auto full_since = Clock::now();
    while (Clock::now() - full_since < kFullFor) {
      ASSERT_EQ(walsender(), pid) << "the server ended the replication session while the queue was full";
      std::this_thread::sleep_for(250ms);
    }
    ASSERT_FALSE(relay.done()) << relay.outcome().reason;
    const auto retries = relay.counters().queue_full;
    EXPECT_GT(retries, 0U) << "the queue never filled: the test did not test QUEUE_FULL";
    PGOUTBOX_ASSERT_EVENTUALLY(relay.counters().queue_full > retries, 10s);  // still full, still retried
    const auto stopping = Clock::now();
    relay.stop();
    EXPECT_LT(Clock::now() - stopping, cfg.shutdown_timeout + 5s) << "the stop was not honoured in time";
  }

  kafka.start();
  RelayRunner again(cfg);
  rows(kRows + 1, kRows + 1);
  std::vector<std::string> ids;
  for (const auto& r : read_topic(kafka.bootstrap(), name + ".E", kRows + 2, 120s))
    ids.push_back(r.header("id").value_or("?"));
  std::vector<std::string> expected;
  for (int i = 0; i <= kRows + 1; ++i) expected.push_back(fmt::format("r{:02d}", i));
  EXPECT_EQ(ids, expected);
  const auto end = pg.query_value("SELECT pg_current_wal_lsn()").value_or("");
  PGOUTBOX_ASSERT_EVENTUALLY(
      pg.query_value("SELECT confirmed_flush_lsn >= '" + end +
                     "'::pg_lsn FROM pg_replication_slots WHERE slot_name = '" + cfg.postgres.slot + "'") == "t",
      60s);
  EXPECT_FALSE(again.done()) << again.outcome().reason;
  again.stop();
  pg.drop_slot_when_free(cfg.postgres.slot);
}

}  // namespace
}  // namespace pgoutbox::test
