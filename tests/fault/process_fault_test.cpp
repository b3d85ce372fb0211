// pgoutbox itself dies: SIGKILL at random moments under load (20 times, restarted each time),
// and a standby instance on the same slot taking over when the active one is killed.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "eventually.h"
#include "fault_fixture.h"
#include "idempotent_consumer.h"
#include "process_memory.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class ProcessFaultTest : public FaultTest {
 protected:
  KafkaBroker& kafka = shared_kafka();

  std::uint64_t delivered(const Pipeline& p) {
    std::uint64_t n = 0;
    for (const auto& t : p.topics()) n += static_cast<std::uint64_t>(topic_record_count(kafka.bootstrap(), t));
    return n;
  }

  std::string log_text(const std::string& name) {
    std::ifstream in(dir.path() + "/" + name);
    std::stringstream all;
    all << in.rdbuf();
    return all.str();
  }
};

TEST_F(ProcessFaultTest, TwentySigkillsAtRandomMomentsLoseNothingAndRepeatOnlyTheUnconfirmedSuffix) {
  constexpr int kKills = 20;
  const auto p = make_pipeline("crash");
  for (const auto& t : p.topics()) create_topic(kafka.bootstrap(), t, 3);
  install_consumer_tables(pg.dsn());
  auto config = config_for(p, kafka.bootstrap());
  config.extra_yaml = "provenance_headers: true\nreconnect:\n  min: 100ms\n  max: 1s\n";
  const auto config_path = write_config("crash.yaml", config);

  IdempotentConsumer::Options consumer_opts{
      .bootstrap = kafka.bootstrap(), .group = "crash-consumer", .topics = p.topics(), .dsn = pg.dsn()};
  auto consumer = std::make_unique<IdempotentConsumer>(consumer_opts);
  consumer->start();
  {
    // The first start creates the slot; the writers begin once it exists.
    auto first = start_pgoutbox(config_path);
    ASSERT_TRUE(wait_streaming(p, *first)) << log_tail();
    first->kill9();
    ASSERT_TRUE(eventually([&] { return slot_free(p); }, 60s));
  }
  auto writer_opts = writer_options(p);
  writer_opts.pause = 50ms;
  LoadWriter writers(writer_opts);
  writers.start();
  RssSampler memory;

  std::mt19937 rng(std::random_device{}());
  // Kill moments from "still connecting" to "streaming for a while".
  std::uniform_int_distribution<int> moment_ms(100, 2500);
  std::vector<Lsn> confirmed_at_kill;  // the slot's position after each death: what was acked
  std::uint64_t kills_while_delivering = 0;
  for (int i = 0; i < kKills; ++i) {
    auto relay = start_pgoutbox(config_path);
    memory.follow(relay->pid());
    const auto delivered_before = delivered(p);
    std::this_thread::sleep_for(std::chrono::milliseconds(moment_ms(rng)));  // the random moment, not an assertion
    ASSERT_TRUE(relay->running()) << "pgoutbox exited on its own:\n" << log_tail();
    relay->kill9();
    if (delivered(p) > delivered_before) ++kills_while_delivering;
    // Its walsender notices the closed socket and lets the slot go; what the slot says then
    // is what pgoutbox had confirmed, and nothing at or before it may come again.
    ASSERT_TRUE(eventually([&] { return slot_free(p); }, 60s)) << "the slot stayed active after the kill";
    confirmed_at_kill.push_back(confirmed_lsn(p));
    if (i == kKills / 2) {
      // The consumer dies too, after database commits whose offsets it had not committed yet.
      consumer.reset();
      consumer = std::make_unique<IdempotentConsumer>(consumer_opts);
      consumer->start();
    }
  }

  auto relay = start_pgoutbox(config_path);
  memory.follow(relay->pid());
  const auto last_kill_lsn = current_wal_lsn();
  const auto recovery = wait_confirmed(p, last_kill_lsn, 180s);
  ASSERT_TRUE(recovery) << log_tail();
  const auto after = writers.committed_count();
  PGOUTBOX_ASSERT_EVENTUALLY(writers.committed_count() >= after + 50, 60s);
  writers.stop();
  const auto committed = writers.committed();
  const auto records = read_until_complete(kafka.bootstrap(), p.topics(), committed, 180s);
  const auto report = audit_events(committed, records);

  // Each record may come at most once per session that could have read it: once at first, and
  // once more after each kill whose confirmed position was not yet past its transaction.
  std::size_t beyond_bound = 0;
  std::size_t repeats_of_confirmed = 0;
  std::vector<std::string> examples;
  std::map<std::string, std::string> commit_lsn_of;
  for (const auto& r : records) {
    if (const auto id = r.header("id"); id && r.header("pgoutbox.lsn"))
      commit_lsn_of.emplace(*id, *r.header("pgoutbox.lsn"));
  }
  for (const auto& [id, copies] : report.copies) {
    const auto lsn = Lsn::parse(commit_lsn_of[id]);
    ASSERT_TRUE(lsn) << "record " << id << " without a pgoutbox.lsn header";
    std::size_t unconfirmed_at = 0;
    for (const Lsn c : confirmed_at_kill) unconfirmed_at += (*lsn >= c) ? 1 : 0;
    if (copies > 1 + unconfirmed_at) {
      ++beyond_bound;
      if (unconfirmed_at == 0) ++repeats_of_confirmed;
      if (examples.size() < 10) {
        examples.push_back(id + " (commit " + lsn->to_string() + "): " + std::to_string(copies) +
                           " copies, unconfirmed at " + std::to_string(unconfirmed_at) + " kills");
      }
    }
  }

  PGOUTBOX_ASSERT_EVENTUALLY(consumer_log_count(pg.dsn(), "crash-consumer") >= committed.size(), 180s);
  const auto consumer_stats = consumer->stats();
  consumer.reset();
  const auto once = check_exactly_once(pg.dsn(), "crash-consumer", committed);

  Figures("sigkill-x20")
      .add("kills", kKills)
      .add("kills_while_delivering", static_cast<double>(kills_while_delivering))
      .add_audit(report)
      .add("repeats_beyond_unconfirmed_suffix", static_cast<double>(beyond_bound))
      .add_mib("max_rss", memory.overall_peak())
      .add_ms("recovery_after_last_restart", *recovery)
      .add("consumer_repeats_dropped", static_cast<double>(consumer_stats.repeats));

  EXPECT_EQ(report.lost, 0U) << report.summary();
  EXPECT_TRUE(report.clean()) << report.summary();
  EXPECT_EQ(beyond_bound, 0U) << repeats_of_confirmed << " repeats of records confirmed before a kill; e.g.\n"
                              << ::testing::PrintToString(examples);
  EXPECT_TRUE(once.exact()) << once.summary();
  EXPECT_GT(kills_while_delivering, 0U) << "no kill landed while records were flowing";
}

TEST_F(ProcessFaultTest, AStandbyTakesOverWithinSecondsWhenTheActiveInstanceIsKilled) {
  const auto p = make_pipeline("standby");
  for (const auto& t : p.topics()) create_topic(kafka.bootstrap(), t, 3);
  auto config = config_for(p, kafka.bootstrap());
  config.extra_yaml = "reconnect:\n  min: 200ms\n  max: 2s\n";
  const auto config_path = write_config("standby.yaml", config);

  auto active = start_pgoutbox(config_path, "active.log");
  ASSERT_TRUE(wait_streaming(p, *active)) << tail_of(dir.path() + "/active.log");
  auto writer_opts = writer_options(p);
  writer_opts.pause = 50ms;
  LoadWriter writers(writer_opts);
  writers.start();
  PGOUTBOX_ASSERT_EVENTUALLY(delivered(p) >= 100, 60s);
  // Read once rows flow: CREATE_REPLICATION_SLOT holds the slot only while it runs, and the slot
  // is free again until START_REPLICATION (the checkpoint is read in between).
  const std::optional<int> walsender = slot_active_pid(pg.dsn(), p.slot);
  ASSERT_TRUE(walsender.has_value()) << "the slot is not held while rows flow";

  // Same config, same slot: Postgres refuses it while the slot is active ("replication slot …
  // is active for PID …", which pgoutbox logs), and it keeps trying.
  auto standby = start_pgoutbox(config_path, "standby.log");
  ASSERT_TRUE(eventually([&] { return log_text("standby.log").find("is active for PID") != std::string::npos; }, 60s))
      << "the standby never reported waiting for the slot:\n"
      << tail_of(dir.path() + "/standby.log");
  ASSERT_TRUE(standby->running()) << tail_of(dir.path() + "/standby.log");
  EXPECT_EQ(slot_active_pid(pg.dsn(), p.slot), walsender) << "the standby took the slot from a live instance";

  active->kill9();
  const auto killed_at = Clock::now();
  std::optional<int> new_walsender;
  ASSERT_TRUE(eventually(
      [&] {
        new_walsender = slot_active_pid(pg.dsn(), p.slot);
        return new_walsender.has_value() && new_walsender != walsender;
      },
      60s, 20ms))
      << "no takeover within 60 s:\n"
      << tail_of(dir.path() + "/standby.log");
  const auto takeover = Clock::now() - killed_at;
  const auto after_kill = current_wal_lsn();
  const auto caught_up = wait_confirmed(p, after_kill, 120s);
  ASSERT_TRUE(caught_up) << tail_of(dir.path() + "/standby.log");
  const auto after = writers.committed_count();
  PGOUTBOX_ASSERT_EVENTUALLY(writers.committed_count() >= after + 50, 60s);
  writers.stop();
  const auto committed = writers.committed();
  const auto records = read_until_complete(kafka.bootstrap(), p.topics(), committed, 120s);
  const auto report = audit_events(committed, records);

  Figures("standby-takeover")
      .add_audit(report)
      .add_ms("takeover", takeover)
      .add_ms("caught_up_after_takeover", *caught_up);

  EXPECT_TRUE(report.clean()) << report.summary();
  EXPECT_TRUE(standby->running()) << tail_of(dir.path() + "/standby.log");
  // "Within a few seconds": reconnect.max is 2 s, so the standby tries at least every ~2 s.
  EXPECT_LT(takeover, 15s);
}

}  // namespace
}  // namespace pgoutbox::test
