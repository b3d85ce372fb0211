// docs/spec.md I10 under faults, with the real binary, Postgres and Kafka:
// - exactly-once: pgoutbox SIGKILLed 20 times and Postgres crashed 5 times under load, and an
//   old instance that wakes up after a standby took over: a read_committed consumer sees every
//   committed event exactly once, in per-key order;
// - at-least-once with the checkpoint: a Postgres crash (which rewinds the slot to its last
//   checkpointed position) publishes again only about one checkpoint interval, where without
//   the checkpoint it publishes everything since Postgres's own last checkpoint.
#include <gtest/gtest.h>
#include <signal.h>

#include <random>
#include <thread>

#include "eventually.h"
#include "fault_fixture.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class ExactlyOnceFaultTest : public FaultTest {
 protected:
  KafkaBroker& kafka = shared_kafka();

  std::uint64_t in_kafka(const Pipeline& p) {
    std::uint64_t n = 0;
    for (const auto& t : p.topics()) n += static_cast<std::uint64_t>(topic_record_count(kafka.bootstrap(), t));
    return n;
  }

  // A pipeline whose topics exist, and its configuration file.
  std::string prepare(const Pipeline& p, const std::string& extra_yaml) {
    for (const auto& t : p.topics()) create_topic(kafka.bootstrap(), t, 3);
    auto config = config_for(p, kafka.bootstrap());
    config.extra_yaml = "reconnect:\n  min: 100ms\n  max: 1s\n" + extra_yaml;
    return write_config(p.name + ".yaml", config);
  }

  // Reads what a read_committed consumer sees (librdkafka's default isolation level) once every
  // committed event is there, and holds it against what was committed.
  AuditReport audit(const Pipeline& p, const std::vector<CommittedEvent>& committed) {
    return audit_events(committed, read_until_complete(kafka.bootstrap(), p.topics(), committed, 180s));
  }

  // Every committed event once: none lost, none twice, in per-key order, nothing foreign.
  static void expect_exactly_once(const AuditReport& report) {
    EXPECT_EQ(report.lost, 0U) << report.summary();
    EXPECT_EQ(report.duplicates, 0U) << report.summary();
    EXPECT_TRUE(report.clean()) << report.summary();
  }
};

constexpr const char* kExactlyOnce = "delivery: exactly-once\n";

TEST_F(ExactlyOnceFaultTest, TwentySigkillsDeliverEveryEventExactlyOnce) {
  constexpr int kKills = 20;
  const auto p = make_pipeline("eoskill");
  const auto config_path = prepare(p, kExactlyOnce);
  {
    auto first = start_pgoutbox(config_path);
    ASSERT_TRUE(wait_streaming(p, *first)) << log_tail();
    first->kill9();
    ASSERT_TRUE(eventually([&] { return slot_free(p); }, 60s));
  }
  auto writer_opts = writer_options(p);
  writer_opts.pause = 20ms;
  LoadWriter writers(writer_opts);
  writers.start();
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> moment_ms(300, 2500);
  std::uint64_t kills_while_delivering = 0;
  for (int i = 0; i < kKills; ++i) {
    auto relay = start_pgoutbox(config_path);
    const auto before = in_kafka(p);
    std::this_thread::sleep_for(std::chrono::milliseconds(moment_ms(rng)));  // the random moment
    ASSERT_TRUE(relay->running()) << "pgoutbox exited on its own:\n" << log_tail();
    relay->kill9();
    if (in_kafka(p) > before) ++kills_while_delivering;
    ASSERT_TRUE(eventually([&] { return slot_free(p); }, 60s)) << "the slot stayed active after the kill";
  }
  auto relay = start_pgoutbox(config_path);
  const auto after = writers.committed_count();
  PGOUTBOX_ASSERT_EVENTUALLY(writers.committed_count() >= after + 50, 60s);
  writers.stop();
  const auto recovery = wait_confirmed(p, current_wal_lsn(), 180s);
  ASSERT_TRUE(recovery) << log_tail();
  const auto committed = writers.committed();
  const auto report = audit(p, committed);
  Figures("exactly-once-sigkill-x20")
      .add("kills", kKills)
      .add("kills_while_delivering", static_cast<double>(kills_while_delivering))
      .add_audit(report)
      .add_ms("recovery_after_last_restart", *recovery);
  expect_exactly_once(report);
  EXPECT_GT(kills_while_delivering, 0U) << "no kill landed while records were flowing";
  EXPECT_TRUE(relay->running()) << log_tail();
}

TEST_F(ExactlyOnceFaultTest, FivePostgresCrashesDeliverEveryEventExactlyOnce) {
  constexpr int kCrashes = 5;
  const auto p = make_pipeline("eoscrash");
  const auto config_path = prepare(p, kExactlyOnce);
  auto relay = start_pgoutbox(config_path);
  ASSERT_TRUE(wait_streaming(p, *relay)) << log_tail();
  auto writer_opts = writer_options(p);
  writer_opts.pause = 20ms;
  LoadWriter writers(writer_opts);
  writers.start();
  for (int i = 0; i < kCrashes; ++i) {
    const auto before = writers.committed_count();
    PGOUTBOX_ASSERT_EVENTUALLY(writers.committed_count() >= before + 100, 120s);
    pg.restart(PgCluster::Stop::immediate);
    ASSERT_TRUE(relay->running()) << "pgoutbox exited on a Postgres crash:\n" << log_tail();
  }
  const auto after = writers.committed_count();
  PGOUTBOX_ASSERT_EVENTUALLY(writers.committed_count() >= after + 50, 120s);
  writers.stop();
  const auto recovery = wait_confirmed(p, current_wal_lsn(), 180s);
  ASSERT_TRUE(recovery) << log_tail();
  const auto committed = writers.committed();
  const auto report = audit(p, committed);
  Figures("exactly-once-postgres-crash-x5").add("crashes", kCrashes).add_audit(report);
  expect_exactly_once(report);
  EXPECT_TRUE(relay->running()) << log_tail();
}

// Kafka away for longer than a transaction may stay open (transaction.timeout.ms, 60 s), then
// hung: what was in the open transaction is aborted, never confirmed, and published again.
TEST_F(ExactlyOnceFaultTest, KafkaStoppedSixtySecondsThenHungDeliversEveryEventExactlyOnce) {
  const auto p = make_pipeline("eoskafka");
  const auto config_path = prepare(p, kExactlyOnce);
  auto relay = start_pgoutbox(config_path);
  ASSERT_TRUE(wait_streaming(p, *relay)) << log_tail();
  auto writer_opts = writer_options(p);
  writer_opts.pause = 20ms;
  LoadWriter writers(writer_opts);
  writers.start();
  PGOUTBOX_ASSERT_EVENTUALLY(in_kafka(p) >= 200, 60s);
  kafka.stop();
  std::this_thread::sleep_for(60s);  // the outage, not an assertion
  ASSERT_TRUE(relay->running()) << "pgoutbox exited while Kafka was down:\n" << log_tail();
  const auto restarted = Clock::now();
  kafka.start();
  PGOUTBOX_ASSERT_EVENTUALLY(wait_confirmed(p, current_wal_lsn(), 5s).has_value(), 180s);
  const auto recovery = Clock::now() - restarted;
  kafka.pause();
  std::this_thread::sleep_for(12s);  // hung past request.timeout.ms
  kafka.resume();
  const auto after = writers.committed_count();
  PGOUTBOX_ASSERT_EVENTUALLY(writers.committed_count() >= after + 50, 60s);
  writers.stop();
  ASSERT_TRUE(wait_confirmed(p, current_wal_lsn(), 180s)) << log_tail();
  const auto committed = writers.committed();
  const auto report = audit(p, committed);
  Figures("exactly-once-kafka-stopped-60s-then-hung").add_audit(report).add_ms("recovery_after_kafka_start", recovery);
  expect_exactly_once(report);
  EXPECT_TRUE(relay->running()) << log_tail();
}

// An instance that was paused (a GC pause, a frozen VM) while a standby took the slot over must
// write nothing when it wakes up: the standby's init_transactions fenced it.
TEST_F(ExactlyOnceFaultTest, AnOldInstanceThatWakesUpAfterATakeoverIsFencedAndWritesNothing) {
  const auto p = make_pipeline("eosfence");
  const auto config_path = prepare(p, kExactlyOnce);
  auto old_one = start_pgoutbox(config_path, "old.log");
  ASSERT_TRUE(wait_streaming(p, *old_one)) << log_tail("old.log");
  auto writer_opts = writer_options(p);
  writer_opts.pause = 20ms;
  LoadWriter writers(writer_opts);
  writers.start();
  PGOUTBOX_ASSERT_EVENTUALLY(in_kafka(p) >= 100, 60s);
  old_one->signal(SIGSTOP);
  // Its walsender is cut off, as a network partition or wal_sender_timeout would do.
  pg.exec("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '" + p.slot + "'");
  ASSERT_TRUE(eventually([&] { return slot_free(p); }, 60s));
  auto standby = start_pgoutbox(config_path, "new.log");
  ASSERT_TRUE(wait_streaming(p, *standby)) << log_tail("new.log");
  const auto taken_over = in_kafka(p);
  PGOUTBOX_ASSERT_EVENTUALLY(in_kafka(p) >= taken_over + 100, 60s);
  old_one->signal(SIGCONT);
  const auto code = old_one->wait_exit(60s);
  ASSERT_TRUE(code) << "the old instance kept running after it woke up:\n" << log_tail("old.log");
  EXPECT_EQ(*code, 22) << log_tail("old.log");
  const auto after = writers.committed_count();
  PGOUTBOX_ASSERT_EVENTUALLY(writers.committed_count() >= after + 50, 60s);
  writers.stop();
  ASSERT_TRUE(wait_confirmed(p, current_wal_lsn(), 180s)) << log_tail("new.log");
  const auto committed = writers.committed();
  const auto report = audit(p, committed);
  Figures("exactly-once-fenced-zombie").add("old_exit", *code).add_audit(report);
  expect_exactly_once(report);
  EXPECT_NE(tail_of(dir.path() + "/old.log").find("took over"), std::string::npos) << log_tail("old.log");
}

// At-least-once: the duplicates one Postgres crash causes, with the checkpoint and without.
TEST_F(ExactlyOnceFaultTest, WithTheCheckpointAPostgresCrashRepublishesAboutOneInterval) {
  constexpr int kCrashes = 3;
  double without_checkpoint = 0;
  for (const bool checkpoint : {false, true}) {
    const auto p = make_pipeline(checkpoint ? "alockpt" : "alonockpt");
    const auto config_path =
        prepare(p, checkpoint ? "checkpoint:\n  interval: 1s\n" : "checkpoint:\n  enabled: false\n");
    auto relay = start_pgoutbox(config_path);
    ASSERT_TRUE(wait_streaming(p, *relay)) << log_tail();
    auto writer_opts = writer_options(p);
    writer_opts.pause = 20ms;
    LoadWriter writers(writer_opts);
    const auto started = Clock::now();
    writers.start();
    for (int i = 0; i < kCrashes; ++i) {
      std::this_thread::sleep_for(5s);  // load between crashes, not an assertion
      const auto before = writers.committed_count();
      pg.restart(PgCluster::Stop::immediate);
      PGOUTBOX_ASSERT_EVENTUALLY(writers.committed_count() >= before + 20, 120s);
    }
    writers.stop();
    const auto elapsed = std::chrono::duration<double>(Clock::now() - started).count();
    ASSERT_TRUE(wait_confirmed(p, current_wal_lsn(), 180s)) << log_tail();
    const auto committed = writers.committed();
    const auto report = audit(p, committed);
    const double rate = static_cast<double>(committed.size()) / elapsed;
    const double per_crash = static_cast<double>(report.duplicates) / kCrashes;
    Figures(checkpoint ? "at-least-once-postgres-crash-with-checkpoint" : "at-least-once-postgres-crash-no-checkpoint")
        .add("crashes", kCrashes)
        .add_audit(report)
        .add("events_per_s", rate)
        .add("duplicates_per_crash", per_crash);
    EXPECT_EQ(report.lost, 0U) << report.summary();
    EXPECT_TRUE(report.clean()) << report.summary();
    if (!checkpoint) {
      // Each crash rewinds the slot to where Postgres last wrote it down (its checkpoints).
      without_checkpoint = per_crash;
      continue;
    }
    // Two checkpoint intervals of events, with the records in flight at the crash.
    EXPECT_LE(per_crash, 2 * rate + 50) << report.summary();
    EXPECT_LE(per_crash, without_checkpoint) << report.summary();
  }
}

}  // namespace
}  // namespace pgoutbox::test
