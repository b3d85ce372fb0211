// Nobody but pgoutbox makes it skip an event (issue 25 items 1 and 2, docs/spec.md I11), against
// the real pgoutbox binary, Postgres and Kafka:
//   - while the relay is stopped under load, a plain Kafka client writes a checkpoint under the
//     slot's key (right key, valid JSON, the current WAL end): after the restart every event is
//     in Kafka, with a signing key (the record is refused, logged with its partition and offset
//     and counted) and without one (the default: no checkpoint is trusted to skip);
//   - a template that lets a row route itself into the checkpoint topic is refused at load, and
//     with the allow-list the refusal proposes, such a row is poison and never reaches that topic.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <iterator>

#include "eventually.h"
#include "fault_fixture.h"
#include "http_get.h"
#include "kafka_client.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

class CheckpointForgeryTest : public FaultTest {
 protected:
  KafkaBroker& kafka = shared_kafka();

  std::string whole_log(const std::string& name) const {
    std::ifstream in(dir.path() + "/" + name);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  // What an attacker with write access to the topic (and nothing else) writes: a plain producer,
  // the slot's key (system identifier, database, slot: none of them secret), a checkpoint at the
  // server's current WAL end.
  void forge(const std::string& topic, const Pipeline& p, int version, const std::string& mac = "") {
    const auto system_id = *pg.query_value("SELECT system_identifier FROM pg_control_system()");
    const auto database = *pg.query_value("SELECT current_database()");
    const std::string key = system_id + "/" + database + "/" + p.slot;
    const std::string value = R"({"version":)" + std::to_string(version) + R"(,"system_id":")" + system_id +
                              R"(","database":")" + database + R"(","slot":")" + p.slot + R"(","timeline":1,"lsn":")" +
                              *pg.query_value("SELECT pg_current_wal_lsn()") +
                              R"(","delivery":"at-least-once","transactional_id":"")" +
                              (version == 2 ? R"(,"mac":")" + mac + "\"" : std::string()) + "}";
    auto producer = make_client(RD_KAFKA_PRODUCER, {{"bootstrap.servers", kafka.bootstrap()}});
    ASSERT_EQ(rd_kafka_producev(producer.get(), RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_KEY(key.data(), key.size()),
                                RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
              RD_KAFKA_RESP_ERR_NO_ERROR);
    ASSERT_EQ(rd_kafka_flush(producer.get(), 30'000), RD_KAFKA_RESP_ERR_NO_ERROR);
  }
};

TEST_F(CheckpointForgeryTest, AForgedCheckpointWrittenWhileTheRelayIsStoppedSkipsNothing) {
  for (const bool signed_checkpoints : {true, false}) {
    const auto p = make_pipeline(signed_checkpoints ? "forgesigned" : "forgeunsigned");
    for (const auto& t : p.topics()) create_topic(kafka.bootstrap(), t, 3);
    const std::string checkpoints = "checkpoints-" + p.name;  // out of the template's reach
    const int port = free_loopback_port();
    auto config = config_for(p, kafka.bootstrap());
    config.metrics_address = "127.0.0.1:" + std::to_string(port);
    config.extra_yaml = "checkpoint:\n  topic: " + checkpoints + "\n  interval: 200ms\n";
    const auto config_path = write_config(p.name + ".yaml", config);

    auto relay = start_pgoutbox(config_path, p.name + "-1.log", signed_checkpoints);
    ASSERT_TRUE(wait_streaming(p, *relay)) << log_tail(p.name + "-1.log");
    auto writer_opts = writer_options(p);
    writer_opts.pause = 10ms;
    LoadWriter writers(writer_opts);
    writers.start();
    PGOUTBOX_ASSERT_EVENTUALLY(writers.committed_count() >= 100, 60s);
    relay->signal(SIGTERM);
    ASSERT_EQ(relay->wait_exit(60s), 0) << log_tail(p.name + "-1.log");

    // The outage: rows the relay has not seen, then the forged record ahead of all of them.
    const auto at_stop = writers.committed_count();
    PGOUTBOX_ASSERT_EVENTUALLY(writers.committed_count() >= at_stop + 300, 60s);
    forge(checkpoints, p, 1);
    forge(checkpoints, p, 2, std::string(64, '0'));  // a guess at a signature

    relay = start_pgoutbox(config_path, p.name + "-2.log", signed_checkpoints);
    PGOUTBOX_ASSERT_EVENTUALLY(writers.committed_count() >= at_stop + 400, 60s);
    writers.stop();
    ASSERT_TRUE(wait_confirmed(p, current_wal_lsn(), 120s)) << log_tail(p.name + "-2.log");
    const auto committed = writers.committed();
    const auto report = audit_events(committed, read_until_complete(kafka.bootstrap(), p.topics(), committed, 120s));
    Figures(signed_checkpoints ? "forged-checkpoint-signed" : "forged-checkpoint-unsigned")
        .add("outage_events", static_cast<double>(committed.size() - at_stop))
        .add_audit(report);
    EXPECT_EQ(report.lost, 0U) << report.summary() << "\n" << log_tail(p.name + "-2.log");
    EXPECT_TRUE(report.clean()) << report.summary();

    const auto log = whole_log(p.name + "-2.log");
    if (signed_checkpoints) {
      // Both forged records are named as refused, with where they are, and counted.
      EXPECT_NE(log.find("is refused: it is not signed"), std::string::npos) << log;
      EXPECT_NE(log.find("is refused: its signature does not verify"), std::string::npos) << log;
      EXPECT_NE(log.find("partition 0 offset"), std::string::npos) << log;
      const auto metrics = http_get("127.0.0.1", port, "/metrics").body;
      EXPECT_EQ(sample_sum(metrics, "pgoutbox_checkpoints_refused_total", "").value_or(0), 2) << metrics;
    } else {
      EXPECT_NE(log.find("not trusted, because checkpoints are not signed"), std::string::npos) << log;
    }
    relay->signal(SIGTERM);
    EXPECT_EQ(relay->wait_exit(60s), 0) << log_tail(p.name + "-2.log");
  }
}

TEST_F(CheckpointForgeryTest, ARowCannotRouteItselfIntoTheCheckpointTopic) {
  const auto p = make_pipeline("forgeroute");
  const std::string dlq = p.name + ".dlq";
  create_topic(kafka.bootstrap(), dlq, 1);
  auto config = config_for(p, kafka.bootstrap());
  config.tables.front().topic = "${aggregatetype}";
  config.extra_yaml = "poison:\n  policy: dead-letter\n  dead_letter_topic: " + dlq + "\n  max_retries: 0\n";
  const auto refused_path = write_config("refused.yaml", config);
  auto refused = start_pgoutbox(refused_path, "refused.log");
  const auto code = refused->wait_exit(30s);
  ASSERT_TRUE(code.has_value()) << "a template that can reach the checkpoint topic was not refused";
  EXPECT_NE(*code, 0);
  const auto refusal = whole_log("refused.log");
  EXPECT_NE(refusal.find("can route a row into pgoutbox.checkpoints"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("topic_pattern: "), std::string::npos) << refusal;

  // With an allow-list of the kind the refusal proposes, the config loads, and the row is
  // poison: dead-lettered, never in the checkpoint topic.
  config.tables.front().extra_yaml =
      "    topic_pattern: \"(?!(?:pgoutbox[._]checkpoints.*|" + p.name + "[._]dlq)$)[A-Za-z0-9._-]+\"\n";
  const std::string ok_topic = p.name + ".Order";
  create_topic(kafka.bootstrap(), ok_topic, 1);
  auto relay = start_pgoutbox(write_config("routed.yaml", config), "routed.log");
  ASSERT_TRUE(wait_streaming(p, *relay)) << log_tail("routed.log");
  pg.exec("INSERT INTO " + p.table + " (id, aggregatetype, aggregateid, type, payload) VALUES ('forged-1', " +
          "'pgoutbox.checkpoints', 'k', 'Created', '{\"lsn\": \"FF/0\"}'), ('ok-1', '" + ok_topic +
          "', 'k', 'Created', '{}')");
  const auto dead = read_topic(kafka.bootstrap(), dlq, 1, 60s);
  ASSERT_EQ(dead.size(), 1U) << log_tail("routed.log");
  EXPECT_EQ(dead[0].header("pgoutbox.dlq.error.code").value_or(""), "INVALID_TOPIC");
  EXPECT_EQ(read_topic(kafka.bootstrap(), ok_topic, 1, 60s).size(), 1U);
  for (const auto& r : read_topic(kafka.bootstrap(), "pgoutbox.checkpoints", 0, 10s))
    EXPECT_NE(r.key.value_or(""), "k") << "a row reached the checkpoint topic";
  relay->signal(SIGTERM);
  EXPECT_EQ(relay->wait_exit(60s), 0) << log_tail("routed.log");
}

}  // namespace
}  // namespace pgoutbox::test
