// Kafka down under load (10 minutes with PGOUTBOX_FAULT_OUTAGE_SECONDS=600, scripts/fault-long.sh)
// and Kafka hung (SIGSTOP past the request timeout): no loss, writers never notice, pgoutbox's
// memory stays at its in-flight cap, and the consumer applies each event exactly once.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdlib>
#include <thread>

#include "eventually.h"
#include "fault_fixture.h"
#include "idempotent_consumer.h"
#include "process_memory.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kMiB = 1024 * 1024;
constexpr std::uint64_t kInFlightCap = 8 * kMiB;

std::chrono::seconds outage_length() {
  if (const char* s = std::getenv("PGOUTBOX_FAULT_OUTAGE_SECONDS"); s != nullptr && *s != '\0')
    return std::chrono::seconds(std::atoi(s));
  return 60s;
}

// What pgoutbox's resident size may grow by over its level before the outage: the records it
// holds (the cap counts their key, value and headers) plus a constant for what the cap does not
// count — librdkafka's per-message bookkeeping (~2 K records at the cap, a few hundred bytes
// each), its per-partition batch and compression buffers, libpq's receive buffer, and malloc's
// arenas not returned to the kernel. 16 MiB is that constant with room for the allocator; a
// relay that kept reading during the outage would pass it within seconds at this load.
// Under AddressSanitizer the child's quarantine is set to 16 MiB and its shadow and redzones
// add to every allocation, so the constant there is 64 MiB.
constexpr std::uint64_t kRssSlack = kSanitized ? 64 * kMiB : 16 * kMiB;

class BrokerFaultTest : public FaultTest {
 protected:
  KafkaBroker& kafka = shared_kafka();

  static void SetUpTestSuite() {
    if constexpr (kSanitized) {
      // Freed memory sits in ASan's quarantine (256 MiB by default) and stays resident.
      std::string options = std::getenv("ASAN_OPTIONS") != nullptr ? std::getenv("ASAN_OPTIONS") : "";
      ::setenv("ASAN_OPTIONS", (options + (options.empty() ? "" : ":") + "quarantine_size_mb=16").c_str(), 1);
    }
  }

  void create_topics(const Pipeline& p) {
    for (const auto& t : p.topics()) create_topic(kafka.bootstrap(), t, 3);
  }

  // Bytes of WAL the server has written but not yet sent to pgoutbox's walsender client.
  std::int64_t unsent_wal(const Pipeline& p) {
    const auto v = pg.query_value(
        "SELECT pg_current_wal_lsn() - r.sent_lsn FROM pg_stat_replication r JOIN pg_replication_slots s "
        "ON s.active_pid = r.pid WHERE s.slot_name = '" +
        p.slot + "'");
    return v ? std::stoll(*v) : -1;
  }

  std::uint64_t delivered(const Pipeline& p) {
    std::uint64_t n = 0;
    for (const auto& t : p.topics()) n += static_cast<std::uint64_t>(topic_record_count(kafka.bootstrap(), t));
    return n;
  }
};

TEST_F(BrokerFaultTest, KafkaDownUnderLoadLosesNothingAndKeepsMemoryAtTheCap) {
  const auto outage = outage_length();
  const auto p = make_pipeline("outage");
  create_topics(p);
  install_consumer_tables(pg.dsn());
  auto config = config_for(p, kafka.bootstrap());
  config.extra_yaml = "limits:\n  max_in_flight_bytes: 8MiB\nreconnect:\n  min: 200ms\n  max: 2s\n";
  auto relay = start_pgoutbox(write_config("outage.yaml", config));
  ASSERT_TRUE(wait_streaming(p, *relay)) << log_tail();
  RssSampler memory;
  memory.follow(relay->pid());

  IdempotentConsumer consumer({.bootstrap = kafka.bootstrap(),
                               .group = "outage-consumer",
                               .topics = p.topics(),
                               .dsn = pg.dsn(),
                               .durable_commits = false});
  consumer.start();
  auto writer_opts = writer_options(p);
  // ~8 KiB events, tens per second: several times the 8 MiB cap within a 60 s outage, in few
  // enough events that the consumer's one-transaction-per-record proof stays quick.
  writer_opts.payload_bytes = 8192;
  writer_opts.pause = 120ms;
  LoadWriter writers(writer_opts);
  writers.start();

  // Warm: the pipeline runs end to end before the fault, so the memory baseline is a working one.
  ASSERT_TRUE(eventually([&] { return !relay->running() || delivered(p) >= 300; }, 120s) && relay->running())
      << "nothing flows before the fault:\n"
      << log_tail();
  const auto baseline = memory.window_peak();
  const auto before = writers.stats();

  const auto stopping_at = Clock::now();
  kafka.stop();
  const auto down_at = Clock::now();
  memory.mark();
  std::int64_t unsent_at_end = 0;
  while (Clock::now() - down_at < outage) {
    ASSERT_TRUE(relay->running()) << "pgoutbox exited while Kafka was down:\n" << log_tail();
    std::this_thread::sleep_for(1s);
  }
  unsent_at_end = unsent_wal(p);
  const auto peak_down = memory.window_peak();
  const auto during = writers.stats();
  const auto written_during = during.events - before.events;
  const auto payload_during = during.payload_bytes - before.payload_bytes;

  const auto starting_at = Clock::now();
  kafka.start();
  const auto broker_start = Clock::now() - starting_at;
  const auto backlog_end = current_wal_lsn();
  const auto recovery = wait_confirmed(p, backlog_end, 300s);
  ASSERT_TRUE(recovery) << "the backlog was not acknowledged within 5 minutes of Kafka's return:\n" << log_tail();
  const auto committed_at_recovery = writers.committed_count();
  PGOUTBOX_ASSERT_EVENTUALLY(writers.committed_count() >= committed_at_recovery + 50, 60s);
  writers.stop();
  const auto stats = writers.stats();
  const auto committed = writers.committed();

  const auto verifying_at = Clock::now();
  const auto records = read_until_complete(kafka.bootstrap(), p.topics(), committed, 180s);
  const auto report = audit_events(committed, records);
  const auto read_back = Clock::now() - verifying_at;
  PGOUTBOX_ASSERT_EVENTUALLY(consumer_log_count(pg.dsn(), "outage-consumer") >= committed.size(), 180s);
  const auto verification = Clock::now() - verifying_at;
  consumer.stop();
  const auto once = check_exactly_once(pg.dsn(), "outage-consumer", committed);

  Figures("kafka-down")
      .add("outage", fmt::format("{}s", outage.count()))
      .add_audit(report)
      .add("written_during_outage", static_cast<double>(written_during))
      .add_mib("payload_during_outage", payload_during)
      .add_mib("wal_unsent_at_end_of_outage", static_cast<std::uint64_t>(std::max<std::int64_t>(unsent_at_end, 0)))
      .add_mib("rss_before", baseline)
      .add_mib("rss_max_while_down", peak_down)
      .add_mib("rss_growth_while_down", peak_down > baseline ? peak_down - baseline : 0)
      .add_mib("vm_hwm", memory.last_hwm())
      .add_mib("cap", kInFlightCap)
      .add_ms("broker_stop", down_at - stopping_at)
      .add_ms("broker_start", broker_start)
      .add_ms("recovery", *recovery)
      .add_ms("read_back", read_back)
      .add_ms("verification", verification)
      .add_ms("max_commit_latency", stats.max_commit_latency)
      .add("writer_failures", static_cast<double>(stats.failed_attempts))
      .add("consumer_repeats_dropped", static_cast<double>(consumer.stats().repeats));

  EXPECT_EQ(report.lost, 0U) << report.summary();
  EXPECT_TRUE(report.clean()) << report.summary();
  EXPECT_TRUE(once.exact()) << once.summary();
  // Writers never failed or blocked: the outbox commit does not depend on Kafka.
  EXPECT_EQ(stats.failed_attempts, 0U);
  EXPECT_GT(written_during, 0U);
  EXPECT_LT(stats.max_commit_latency, 15s) << "a writer blocked";
  EXPECT_TRUE(relay->running()) << log_tail();
  // Bounded memory (I6): at the cap pgoutbox stops reading and the WAL waits in Postgres.
  EXPECT_LE(peak_down, baseline + kInFlightCap + kRssSlack) << "RSS grew beyond the in-flight cap while Kafka was down";
  if (payload_during > 3 * kInFlightCap) {
    EXPECT_GT(unsent_at_end, static_cast<std::int64_t>(kInFlightCap))
        << "more than the cap was written during the outage, yet Postgres does not hold it: pgoutbox kept reading";
  } else {
    std::printf("note: only %.1f MiB written during the outage; the cap was not tested\n",
                static_cast<double>(payload_during) / kMiB);
  }
}

TEST_F(BrokerFaultTest, HungBrokerPastTheRequestTimeoutLosesNothingAndRepeatsNothing) {
  constexpr auto kRequestTimeout = 5s;
  const auto p = make_pipeline("hung");
  create_topics(p);
  install_consumer_tables(pg.dsn());
  auto config = config_for(p, kafka.bootstrap());
  config.kafka_properties["request.timeout.ms"] = "5000";
  config.extra_yaml = "reconnect:\n  min: 200ms\n  max: 2s\n";
  auto relay = start_pgoutbox(write_config("hung.yaml", config));
  ASSERT_TRUE(wait_streaming(p, *relay)) << log_tail();

  IdempotentConsumer consumer({.bootstrap = kafka.bootstrap(),
                               .group = "hung-consumer",
                               .topics = p.topics(),
                               .dsn = pg.dsn(),
                               .durable_commits = false});
  consumer.start();
  auto writer_opts = writer_options(p);
  writer_opts.pause = 50ms;
  LoadWriter writers(writer_opts);
  writers.start();
  ASSERT_TRUE(eventually([&] { return !relay->running() || delivered(p) >= 200; }, 120s) && relay->running())
      << "nothing flows before the fault:\n"
      << log_tail();

  // Frozen with its sockets open: requests in flight time out on the client side and are sent
  // again; the broker, thawed, then sees some of them twice and must drop the repeats by
  // producer id and sequence.
  kafka.pause();
  const auto hung_at = Clock::now();
  while (Clock::now() - hung_at < 2 * kRequestTimeout + 2s) {
    ASSERT_TRUE(relay->running()) << log_tail();
    std::this_thread::sleep_for(500ms);
  }
  const auto written_while_hung = writers.committed_count();
  kafka.resume();
  const auto recovery = wait_confirmed(p, current_wal_lsn(), 180s);
  ASSERT_TRUE(recovery) << "nothing confirmed after the broker thawed:\n" << log_tail();
  const auto after = writers.committed_count();
  PGOUTBOX_ASSERT_EVENTUALLY(writers.committed_count() >= after + 50, 60s);
  writers.stop();
  const auto stats = writers.stats();
  const auto committed = writers.committed();

  const auto records = read_until_complete(kafka.bootstrap(), p.topics(), committed, 120s);
  const auto report = audit_events(committed, records);
  // pgoutbox's own delivery is judged on what Kafka holds; the consumer below checks what an
  // idempotent application reading through a consumer group makes of it.
  EXPECT_TRUE(report.clean()) << report.summary();
  const auto consumed = [&] {
    const auto s = consumer.stats();
    return fmt::format("the test's consumer: {} records consumed, {} applied, {} repeats, {} database retries of {}",
                       s.records, s.applied, s.repeats, s.db_retries, committed.size());
  };
  PGOUTBOX_ASSERT_EVENTUALLY(consumer_log_count(pg.dsn(), "hung-consumer") >= committed.size(), 120s) << consumed();
  consumer.stop();
  const auto once = check_exactly_once(pg.dsn(), "hung-consumer", committed);

  Figures("kafka-hung")
      .add("hang",
           fmt::format("{}s", std::chrono::duration_cast<std::chrono::seconds>(2 * kRequestTimeout + 2s).count()))
      .add_audit(report)
      .add("committed_by_thaw", static_cast<double>(written_while_hung))
      .add_ms("recovery", *recovery)
      .add_ms("max_commit_latency", stats.max_commit_latency);

  EXPECT_EQ(report.duplicates, 0U) << "the idempotent producer should have dropped every resend\n" << report.summary();
  EXPECT_TRUE(once.exact()) << once.summary();
  EXPECT_EQ(stats.failed_attempts, 0U);
  EXPECT_TRUE(relay->running()) << log_tail();
}

// Issue 12 #8: while Kafka is down, transactions that carry no outbox row (here inserts into a
// table the publication also publishes) arrive as Begin/Commit pairs behind the first
// unacknowledged record. Each used to stay in the confirm tracker until Kafka came back (~40
// bytes each: 300,000 of them grew pgoutbox by 12 MiB, where folded they grow it by 0.1 MiB).
// 300,000 in 30 s is ten times the 1,000/s, so that the growth an unfolded tracker
// shows over a 10-minute outage at that rate stands clear of the bound in a short test.
TEST_F(BrokerFaultTest, EmptyTransactionsDuringAnOutageKeepMemoryFlat) {
  constexpr int kEmptyTransactions = 300'000;
  constexpr int kPerSecond = 10'000;
  constexpr std::uint64_t kGrowthBound = kSanitized ? 32 * kMiB : 4 * kMiB;
  const auto p = make_pipeline("emptytx");
  create_topics(p);
  pg.exec("CREATE TABLE emptytx_side (n bigint); CREATE PUBLICATION " + p.publication + " FOR TABLE " + p.table +
          ", emptytx_side WITH (publish = 'insert')");
  auto config = config_for(p, kafka.bootstrap());
  config.extra_yaml = "reconnect:\n  min: 200ms\n  max: 2s\n";
  auto relay = start_pgoutbox(write_config("emptytx.yaml", config));
  ASSERT_TRUE(wait_streaming(p, *relay)) << log_tail();
  RssSampler memory;
  memory.follow(relay->pid());

  auto writer_opts = writer_options(p);
  writer_opts.threads = 1;
  writer_opts.rows_per_transaction = 1;
  writer_opts.pause = 200ms;
  LoadWriter writers(writer_opts);
  writers.start();
  ASSERT_TRUE(eventually([&] { return !relay->running() || delivered(p) >= 10; }, 120s) && relay->running())
      << "nothing flows before the fault:\n"
      << log_tail();

  kafka.stop();
  // Outbox rows committed since wait unacknowledged at the head of the tracker; the level the
  // relay settles at with Kafka gone is the baseline.
  const auto stopped = writers.committed_count();
  PGOUTBOX_ASSERT_EVENTUALLY(writers.committed_count() >= stopped + 10, 30s);
  memory.mark();
  std::this_thread::sleep_for(2s);
  const auto baseline = memory.window_peak();

  memory.mark();
  const auto empty_from = Clock::now();
  // One server-side loop, a commit per insert, paced every 1,000 commits.
  pg.exec(fmt::format(
      "DO $$ DECLARE t0 timestamptz := clock_timestamp(); BEGIN "
      "PERFORM pg_catalog.set_config('synchronous_commit', 'off', false); FOR i IN 1..{} LOOP "
      "INSERT INTO emptytx_side VALUES (i); COMMIT; IF i % 1000 = 0 THEN PERFORM pg_catalog.pg_sleep(GREATEST(0, "
      "extract(epoch FROM t0 + i * interval '1 second' / {} - clock_timestamp()))); END IF; END LOOP; END $$",
      kEmptyTransactions, kPerSecond));
  const auto empty_for = Clock::now() - empty_from;
  // Until the walsender has sent the last of them, and pgoutbox has had a moment to decode it.
  const auto last_empty = current_wal_lsn();
  PGOUTBOX_ASSERT_EVENTUALLY(!relay->running() || pg.query_value("SELECT r.sent_lsn >= '" + last_empty.to_string() +
                                                                 "'::pg_lsn FROM pg_stat_replication r JOIN "
                                                                 "pg_replication_slots s ON s.active_pid = r.pid WHERE "
                                                                 "s.slot_name = '" +
                                                                 p.slot + "'") == "t",
                             120s);
  std::this_thread::sleep_for(2s);
  const auto peak = memory.window_peak();
  ASSERT_TRUE(relay->running()) << "pgoutbox exited while Kafka was down:\n" << log_tail();

  kafka.start();
  const auto recovery = wait_confirmed(p, current_wal_lsn(), 300s);
  ASSERT_TRUE(recovery) << "the slot did not advance after Kafka's return:\n" << log_tail();
  const auto after = writers.committed_count();
  PGOUTBOX_ASSERT_EVENTUALLY(writers.committed_count() >= after + 10, 60s);
  writers.stop();
  const auto committed = writers.committed();
  const auto records = read_until_complete(kafka.bootstrap(), p.topics(), committed, 180s);
  const auto report = audit_events(committed, records);
  ASSERT_TRUE(wait_confirmed(p, current_wal_lsn(), 60s)) << log_tail();

  const double seconds = std::chrono::duration<double>(empty_for).count();
  Figures("empty-transactions-while-down")
      .add("empty_transactions", static_cast<double>(kEmptyTransactions))
      .add("per_second", seconds > 0 ? kEmptyTransactions / seconds : 0)
      .add_audit(report)
      .add_mib("rss_before", baseline)
      .add_mib("rss_max_while_down", peak)
      .add_mib("rss_growth_while_down", peak > baseline ? peak - baseline : 0)
      .add_ms("recovery", *recovery);

  EXPECT_EQ(report.lost, 0U) << report.summary();
  EXPECT_TRUE(report.clean()) << report.summary();
  EXPECT_GT(kEmptyTransactions / seconds, 1000.0) << "the server committed fewer than 1,000 empty transactions/s";
  EXPECT_LE(peak, baseline + kGrowthBound) << "RSS grew with the empty transactions while Kafka was down";
  EXPECT_TRUE(relay->running()) << log_tail();
}

}  // namespace
}  // namespace pgoutbox::test
