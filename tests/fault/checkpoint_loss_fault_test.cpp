// A checkpoint topic lost under a slot that has streamed (issue 37, item 1), against the real
// pgoutbox binary, Postgres 15 and Kafka 4.4: pgoutbox streams, stops, the checkpoint topic is
// deleted while rows go on being committed, and pgoutbox starts again. The reader finds no topic;
// the slot is older than that start, so the checkpoints that said what Kafka already holds are
// gone. Exactly-once refuses to start (exit 25, naming the fix), twice (it does not create the
// topic, which the next start would find empty), rather than publish again silently;
// `run --accept-lost-checkpoint` creates it and starts, and nothing is lost.
// At-least-once says it at warn and counts it in pgoutbox_checkpoint_topic_lost_total.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <iterator>

#include "eventually.h"
#include "fault_fixture.h"
#include "http_get.h"
#include "kafka_client.h"
#include "pg_cluster.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

class CheckpointLossTest : public FaultTest, public ::testing::WithParamInterface<std::string> {
 protected:
  KafkaBroker& kafka = shared_kafka();

  std::string whole_log(const std::string& name) const {
    std::ifstream in(dir.path() + "/" + name);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
};

TEST_P(CheckpointLossTest, ACheckpointTopicDeletedUnderAnOlderSlotIsNamedNotTakenForNoCheckpoint) {
  const bool exactly_once = GetParam() == "exactly-once";
  const auto p = make_pipeline(exactly_once ? "losteos" : "lostalo");
  for (const auto& t : p.topics()) create_topic(kafka.bootstrap(), t, 3);
  const std::string checkpoints = "checkpoints-" + p.name;
  const int port = free_loopback_port();
  auto config = config_for(p, kafka.bootstrap());
  config.metrics_address = "127.0.0.1:" + std::to_string(port);
  config.extra_yaml = std::string(exactly_once ? "delivery: exactly-once\n" : "") +
                      "checkpoint:\n  topic: " + checkpoints + "\n  interval: 200ms\n";
  const auto config_path = write_config(p.name + ".yaml", config);

  auto relay = start_pgoutbox(config_path, "first.log");
  ASSERT_TRUE(wait_streaming(p, *relay)) << log_tail("first.log");
  auto writer_opts = writer_options(p);
  writer_opts.pause = 10ms;
  LoadWriter writers(writer_opts);
  writers.start();
  PGOUTBOX_ASSERT_EVENTUALLY(writers.committed_count() >= 200, 60s);
  relay->signal(SIGTERM);
  ASSERT_EQ(relay->wait_exit(60s), 0) << log_tail("first.log");

  delete_topic(kafka.bootstrap(), checkpoints);
  const auto at_stop = writers.committed_count();
  PGOUTBOX_ASSERT_EVENTUALLY(writers.committed_count() >= at_stop + 200, 60s);

  if (exactly_once) {
    relay = start_pgoutbox(config_path, "refused.log");
    const auto code = relay->wait_exit(120s);
    ASSERT_TRUE(code.has_value()) << "exactly-once started without its checkpoints:\n" << log_tail("refused.log");
    EXPECT_EQ(*code, 25) << log_tail("refused.log");
    const auto log = whole_log("refused.log");
    EXPECT_NE(log.find("checkpoint topic did not exist, though replication slot " + p.slot + " existed before"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("--accept-lost-checkpoint"), std::string::npos) << log;
    relay = start_pgoutbox(config_path, "refused-again.log");
    EXPECT_EQ(relay->wait_exit(120s), 25) << "the refused start left a topic the next one took for empty:\n"
                                          << log_tail("refused-again.log");
    relay = start_pgoutbox(config_path, "second.log", true, {"--accept-lost-checkpoint"});
  } else {
    relay = start_pgoutbox(config_path, "second.log");
  }
  PGOUTBOX_ASSERT_EVENTUALLY(writers.committed_count() >= at_stop + 400, 60s);
  writers.stop();
  ASSERT_TRUE(wait_confirmed(p, current_wal_lsn(), 120s)) << log_tail("second.log");
  const auto committed = writers.committed();
  const auto report = audit_events(committed, read_until_complete(kafka.bootstrap(), p.topics(), committed, 120s));
  Figures(exactly_once ? "checkpoint-topic-lost-exactly-once" : "checkpoint-topic-lost-at-least-once")
      .add("events", static_cast<double>(committed.size()))
      .add_audit(report);
  EXPECT_EQ(report.lost, 0U) << report.summary() << "\n" << log_tail("second.log");
  const auto log = whole_log("second.log");
  EXPECT_NE(log.find("checkpoint topic did not exist"), std::string::npos) << log;
  const auto metrics = http_get("127.0.0.1", port, "/metrics").body;
  EXPECT_EQ(sample_sum(metrics, "pgoutbox_checkpoint_topic_lost_total", "").value_or(0), 1) << metrics;
  relay->signal(SIGTERM);
  EXPECT_EQ(relay->wait_exit(60s), 0) << log_tail("second.log");
}

// The tombstone attack of issue 38 item 1, exactly-once, as the issue tried it: with the outbox
// quiet, a null record under the slot's key is the topic's newest, then Postgres crashes
// (immediate restart), which rewinds the slot to its last persisted position. Before, the reader
// took the tombstone for "no checkpoint … nothing to skip" and a read_committed consumer read
// every event since Postgres's last checkpoint twice; now the tombstone is refused (warn, with
// partition and offset, counted) and the checkpoint before it still skips them.
TEST_F(CheckpointLossTest, ATombstoneUnderTheSlotsKeyBeforeAPostgresCrashCostsNoDuplicates) {
  const auto p = make_pipeline("tombeos");
  for (const auto& t : p.topics()) create_topic(kafka.bootstrap(), t, 3);
  const std::string checkpoints = "pgoutbox.checkpoints." + p.name;
  const int port = free_loopback_port();
  auto config = config_for(p, kafka.bootstrap());
  config.metrics_address = "127.0.0.1:" + std::to_string(port);
  config.extra_yaml = "delivery: exactly-once\ncheckpoint:\n  topic: " + checkpoints + "\n";
  auto relay = start_pgoutbox(write_config(p.name + ".yaml", config), "relay.log");
  ASSERT_TRUE(wait_streaming(p, *relay)) << log_tail("relay.log");
  auto writer_opts = writer_options(p);
  writer_opts.pause = 5ms;
  LoadWriter writers(writer_opts);
  writers.start();
  PGOUTBOX_ASSERT_EVENTUALLY(writers.committed_count() >= 500, 60s);
  writers.stop();
  ASSERT_TRUE(wait_confirmed(p, current_wal_lsn(), 120s)) << log_tail("relay.log");

  const auto system = pg.query_value("SELECT system_identifier::text FROM pg_control_system()");
  const auto database = pg.query_value("SELECT current_database()", "postgres");
  ASSERT_TRUE(system && database);
  const auto key = *system + "/" + *database + "/" + p.slot;
  auto attacker = make_client(RD_KAFKA_PRODUCER, {{"bootstrap.servers", kafka.bootstrap()}});
  ASSERT_EQ(rd_kafka_producev(attacker.get(), RD_KAFKA_V_TOPIC(checkpoints.c_str()),
                              RD_KAFKA_V_KEY(key.data(), key.size()), RD_KAFKA_V_VALUE(nullptr, 0), RD_KAFKA_V_END),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  ASSERT_EQ(rd_kafka_flush(attacker.get(), 30'000), RD_KAFKA_RESP_ERR_NO_ERROR);
  pg.restart(PgCluster::Stop::immediate);

  // The relay reconnects, reads the topic again, and is caught up once more.
  ASSERT_TRUE(wait_confirmed(p, current_wal_lsn(), 120s)) << log_tail("relay.log");
  const auto committed = writers.committed();
  const auto report = audit_events(committed, read_until_complete(kafka.bootstrap(), p.topics(), committed, 120s));
  Figures("checkpoint-tombstone-exactly-once").add("events", static_cast<double>(committed.size())).add_audit(report);
  EXPECT_EQ(report.lost, 0U) << report.summary();
  EXPECT_EQ(report.duplicates, 0U) << report.summary() << "\n" << log_tail("relay.log");
  const auto log = whole_log("relay.log");
  const auto line = log.find("under this slot's key is refused: it is a tombstone");
  ASSERT_NE(line, std::string::npos) << log;
  const auto begin = log.rfind('\n', line) + 1;  // npos + 1: the first line
  EXPECT_NE(log.substr(begin, line - begin).find(" warn "), std::string::npos) << log.substr(begin, line + 80 - begin);
  const auto metrics = http_get("127.0.0.1", port, "/metrics").body;
  EXPECT_GE(sample_sum(metrics, "pgoutbox_checkpoints_refused_total", "").value_or(0), 1) << metrics;
  relay->signal(SIGTERM);
  EXPECT_EQ(relay->wait_exit(60s), 0) << log_tail("relay.log");
}

INSTANTIATE_TEST_SUITE_P(Modes, CheckpointLossTest, ::testing::Values("at-least-once", "exactly-once"),
                         [](const ::testing::TestParamInfo<std::string>& mode) {
                           return mode.param == "exactly-once" ? std::string("ExactlyOnce")
                                                               : std::string("AtLeastOnce");
                         });

}  // namespace
}  // namespace pgoutbox::test
