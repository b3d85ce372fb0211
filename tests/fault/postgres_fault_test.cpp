// Postgres restarted under load, with a fast shutdown and with an immediate one (a crash:
// recovery replays the WAL). pgoutbox reconnects with backoff and resumes from the slot; the
// writers retry the transactions that failed and record only those that committed.
#include <gtest/gtest.h>

#include <thread>

#include "eventually.h"
#include "fault_fixture.h"
#include "idempotent_consumer.h"
#include "process_memory.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class PostgresFaultTest : public FaultTest {
 protected:
  KafkaBroker& kafka = shared_kafka();

  std::uint64_t delivered(const Pipeline& p) {
    std::uint64_t n = 0;
    for (const auto& t : p.topics()) n += static_cast<std::uint64_t>(topic_record_count(kafka.bootstrap(), t));
    return n;
  }
};

TEST_F(PostgresFaultTest, FastAndImmediateRestartsUnderLoadLoseNothing) {
  const auto p = make_pipeline("pgrestart");
  for (const auto& t : p.topics()) create_topic(kafka.bootstrap(), t, 3);
  install_consumer_tables(pg.dsn());
  auto config = config_for(p, kafka.bootstrap());
  config.extra_yaml = "reconnect:\n  min: 200ms\n  max: 2s\n";
  auto relay = start_pgoutbox(write_config("pgrestart.yaml", config));
  ASSERT_TRUE(wait_streaming(p, *relay)) << log_tail();
  RssSampler memory;
  memory.follow(relay->pid());

  IdempotentConsumer consumer(
      {.bootstrap = kafka.bootstrap(), .group = "pgrestart-consumer", .topics = p.topics(), .dsn = pg.dsn()});
  consumer.start();
  auto writer_opts = writer_options(p);
  writer_opts.pause = 50ms;
  LoadWriter writers(writer_opts);
  writers.start();
  ASSERT_TRUE(eventually([&] { return !relay->running() || delivered(p) >= 200; }, 120s) && relay->running())
      << "nothing flows before the fault:\n"
      << log_tail();

  Figures figures("postgres-restart");
  for (const auto mode : {PgCluster::Stop::fast, PgCluster::Stop::immediate}) {
    const std::string name = mode == PgCluster::Stop::fast ? "fast" : "immediate";
    const auto committed_before = writers.committed_count();
    const auto restart_began = Clock::now();
    pg.restart(mode);
    const auto back_at = Clock::now();
    // Writers find the server again and commit; pgoutbox resumes and acknowledges their work.
    PGOUTBOX_ASSERT_EVENTUALLY(writers.committed_count() >= committed_before + 50, 120s);
    const auto recovery = wait_confirmed(p, current_wal_lsn(), 180s);
    ASSERT_TRUE(recovery) << "nothing confirmed after the " << name << " restart:\n" << log_tail();
    ASSERT_TRUE(relay->running()) << "pgoutbox exited on a Postgres restart:\n" << log_tail();
    figures.add_ms(name + "_restart", back_at - restart_began).add_ms(name + "_recovery", (Clock::now() - back_at));
  }
  writers.stop();
  const auto stats = writers.stats();
  const auto committed = writers.committed();
  const auto records = read_until_complete(kafka.bootstrap(), p.topics(), committed, 180s);
  const auto report = audit_events(committed, records);
  PGOUTBOX_ASSERT_EVENTUALLY(consumer_log_count(pg.dsn(), "pgrestart-consumer") >= committed.size(), 180s);
  consumer.stop();
  const auto once = check_exactly_once(pg.dsn(), "pgrestart-consumer", committed);

  figures.add_audit(report)
      .add("writer_retries", static_cast<double>(stats.failed_attempts))
      .add("commits_cut_off_and_looked_up", static_cast<double>(stats.unsure_commits))
      .add("consumer_db_retries", static_cast<double>(consumer.stats().db_retries))
      .add("consumer_repeats_dropped", static_cast<double>(consumer.stats().repeats))
      .add_mib("max_rss", memory.overall_peak());

  EXPECT_EQ(report.lost, 0U) << report.summary();
  EXPECT_TRUE(report.clean()) << report.summary();
  EXPECT_TRUE(once.exact()) << once.summary();
  EXPECT_GT(stats.failed_attempts, 0U) << "the restarts did not reach the writers: the fault was not injected";
  EXPECT_TRUE(relay->running()) << log_tail();
}

}  // namespace
}  // namespace pgoutbox::test
