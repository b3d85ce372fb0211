// A database restored from a storage snapshot onto the same timeline (issue 24 item 6,
// docs/spec.md I11), against the real pgoutbox binary, Postgres and Kafka: same system, timeline
// and slot as the original, and once its WAL has passed the original's last checkpoint, the same
// positions with other transactions in them. The checkpoint names its last transaction; the
// restored stream never shows it, so nothing is skipped for good and every row written after the
// restore reaches Kafka.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>

#include "eventually.h"
#include "fault_fixture.h"
#include "http_get.h"
#include "kafka_client.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

class RestoredSnapshotTest : public FaultTest {
 protected:
  KafkaBroker& kafka = shared_kafka();

  // The storage snapshot: a byte copy of the stopped cluster's data directory.
  void copy_cluster(const std::string& from, const std::string& to) {
    pg.stop();
    ASSERT_EQ(std::system(("rm -rf '" + to + "' && cp -a '" + from + "' '" + to + "'").c_str()), 0);
    pg.start();
  }

  // Rows of a writer of its own (ids <prefix>-w…) until `done`; what was committed.
  std::vector<CommittedEvent> write(const Pipeline& p, const std::string& prefix,
                                    const std::function<bool(const LoadWriter&)>& done) {
    auto options = writer_options(p);
    options.id_prefix = prefix;
    options.pause = 5ms;
    LoadWriter writers(options);
    writers.start();
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (!done(writers) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(50ms);
    writers.stop();
    EXPECT_TRUE(done(writers)) << prefix << ": the writers did not get there in 120 s";
    return writers.committed();
  }

  std::string whole_log(const std::string& name) const {
    std::ifstream in(dir.path() + "/" + name);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
};

TEST_F(RestoredSnapshotTest, RowsWrittenAfterARestoreOntoTheSameTimelineAreAllPublished) {
  const auto p = make_pipeline("restored");
  for (const auto& t : p.topics()) create_topic(kafka.bootstrap(), t, 3);
  const std::string checkpoints = "checkpoints-" + p.name;
  const int port = free_loopback_port();
  auto config = config_for(p, kafka.bootstrap());
  config.metrics_address = "127.0.0.1:" + std::to_string(port);
  config.extra_yaml = "checkpoint:\n  topic: " + checkpoints + "\n  interval: 200ms\n";
  const auto config_path = write_config(p.name + ".yaml", config);

  // The slot exists; the snapshot keeps it at this position.
  auto relay = start_pgoutbox(config_path, "1.log");
  ASSERT_TRUE(wait_streaming(p, *relay)) << log_tail("1.log");
  relay->signal(SIGTERM);
  ASSERT_EQ(relay->wait_exit(60s), 0) << log_tail("1.log");
  const std::string snapshot = dir.path() + "/snapshot";
  copy_cluster(pg.data_dir(), snapshot);

  // The original history goes on, and pgoutbox checkpoints it.
  relay = start_pgoutbox(config_path, "2.log");
  ASSERT_TRUE(wait_streaming(p, *relay)) << log_tail("2.log");
  const auto original = write(p, "orig", [](const LoadWriter& w) { return w.committed_count() >= 300; });
  const Lsn original_end = current_wal_lsn();
  ASSERT_TRUE(wait_confirmed(p, original_end, 120s)) << log_tail("2.log");
  relay->signal(SIGTERM);  // with a last checkpoint at the end of the original history
  ASSERT_EQ(relay->wait_exit(60s), 0) << log_tail("2.log");
  ASSERT_FALSE(original.empty());

  // The snapshot is restored onto the same timeline, and the application writes on until the
  // WAL passes the original's checkpoint: it is then trusted by every rule but the history proof.
  copy_cluster(snapshot, pg.data_dir());
  ASSERT_LT(current_wal_lsn(), original_end);
  const auto restored = write(p, "restored", [&](const LoadWriter&) { return current_wal_lsn() > original_end; });
  ASSERT_FALSE(restored.empty());

  relay = start_pgoutbox(config_path, "3.log");
  ASSERT_TRUE(wait_confirmed(p, current_wal_lsn(), 120s)) << log_tail("3.log");
  const auto report = audit_events(restored, read_until_complete(kafka.bootstrap(), p.topics(), restored, 60s));
  Figures("restored-snapshot-same-timeline").add_audit(report);
  EXPECT_EQ(report.lost, 0U) << report.summary() << "\n" << log_tail("3.log");

  const auto log = whole_log("3.log");
  EXPECT_NE(log.find("another WAL history"), std::string::npos) << log_tail("3.log");
  const auto metrics = http_get("127.0.0.1", port, "/metrics").body;
  EXPECT_GE(sample_sum(metrics, "pgoutbox_checkpoints_refused_total", "").value_or(0), 1) << metrics;
  relay->signal(SIGTERM);
  EXPECT_EQ(relay->wait_exit(60s), 0) << log_tail("3.log");
}

}  // namespace
}  // namespace pgoutbox::test
