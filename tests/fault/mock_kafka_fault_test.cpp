// Broker errors a real Kafka cannot give on cue, from librdkafka's mock cluster (3 brokers in
// this process): NOT_LEADER_FOR_PARTITION with leaders moving, REQUEST_TIMED_OUT (answered late),
// OUT_OF_ORDER_SEQUENCE_NUMBER, and brokers that drop connections mid-produce. pgoutbox must
// not exit and must lose nothing; what it wrote is read back from the mock cluster.
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "eventually.h"
#include "fault_fixture.h"
#include "mock_kafka.h"
#include "pgoutbox/config/config.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

constexpr int kBrokers = 3;
constexpr int kPartitions = 3;

class MockKafkaFaultTest : public FaultTest {
 protected:
  MockKafkaCluster mock{kBrokers};

  struct Run {
    Pipeline pipeline;
    std::unique_ptr<PgoutboxProcess> relay;
    std::unique_ptr<LoadWriter> writers;
  };

  Run start(const std::string& name, std::map<std::string, std::string> kafka_properties = {}) {
    Run run{make_pipeline(name), nullptr, nullptr};
    // The mock serves no CreateTopics: without the checkpoint topic, every start of a session
    // (and a fatal producer error starts one) waits out the 30 s admin timeout before it streams,
    // and three such waits outlast the wait for the injected errors below.
    mock.create_topic(config::CheckpointConfig{}.topic, 1, kBrokers);
    for (const auto& t : run.pipeline.topics()) {
      mock.create_topic(t, kPartitions, kBrokers);
      // Every broker leads a partition, so errors queued on each of them are all met.
      for (int part = 0; part < kPartitions; ++part) mock.set_leader(t, part, 1 + part % kBrokers);
    }
    auto config = config_for(run.pipeline, mock.bootstrap());
    config.kafka_properties["request.timeout.ms"] = "3000";
    for (auto& [k, v] : kafka_properties) config.kafka_properties[k] = v;
    config.extra_yaml = "reconnect:\n  min: 200ms\n  max: 2s\n";
    run.relay = start_pgoutbox(write_config(name + ".yaml", config), name + ".log");
    if (!wait_streaming(run.pipeline, *run.relay))
      throw std::runtime_error("pgoutbox did not stream:\n" + log_tail(name + ".log"));
    auto opts = writer_options(run.pipeline);
    opts.threads = 1;
    opts.pause = 50ms;
    run.writers = std::make_unique<LoadWriter>(opts);
    run.writers->start();
    return run;
  }

  std::uint64_t delivered(const Run& run) {
    std::uint64_t n = 0;
    for (const auto& t : run.pipeline.topics())
      n += static_cast<std::uint64_t>(topic_record_count(mock.bootstrap(), t));
    return n;
  }

  bool flowing(Run& run, std::uint64_t at_least) {
    return eventually([&] { return !run.relay->running() || delivered(run) >= at_least; }, 90s) && run.relay->running();
  }

  bool injected_errors_used_up() {
    for (int b = 1; b <= kBrokers; ++b) {
      if (mock.pending_produce_errors(b) > 0) return false;
    }
    return true;
  }

  // Lets the writers go on for a while after the fault, then holds Kafka against the commits.
  void finish(Run& run, const std::string& scenario) {
    const auto after = run.writers->committed_count();
    PGOUTBOX_ASSERT_EVENTUALLY(run.writers->committed_count() >= after + 30, 60s);
    run.writers->stop();
    const auto committed = run.writers->committed();
    ASSERT_TRUE(wait_confirmed(run.pipeline, current_wal_lsn(), 120s)) << log_tail(run.pipeline.name + ".log");
    const auto records = read_until_complete(mock.bootstrap(), run.pipeline.topics(), committed, 60s);
    const auto report = audit_events(committed, records);
    Figures(scenario).add_audit(report);
    EXPECT_EQ(report.lost, 0U) << report.summary();
    EXPECT_TRUE(report.clean()) << report.summary();
    EXPECT_TRUE(run.relay->running()) << "pgoutbox exited:\n" << log_tail(run.pipeline.name + ".log");
  }
};

// One request in flight, as for RequestTimedOut below, and for the same reason: the mock appends
// a batch after one it refused. Leadership moves here, and librdkafka >= 2.5 follows it at once
// from the Produce response's CurrentLeader (KIP-951): the refused batch and the next one go
// together to the new leader, whose queued NOT_LEADER_FOR_PARTITION refuses the first while it
// appends the second. librdkafka then rightly (for a real broker, which refuses the gap with
// OUT_OF_ORDER_SEQUENCE_NUMBER) reports the refused batch delivered ("implicitly acked by
// subsequent batch success", rdkafka_request.c rd_kafka_handle_idempotent_Produce_success), and
// the mock holds less than it acknowledged. 2.8.0 lost 1 to 5 such records in most runs.
TEST_F(MockKafkaFaultTest, NotLeaderForPartitionWhileLeadersMove) {
  auto run = start("mock_leader", {{"max.in.flight.requests.per.connection", "1"}});
  ASSERT_TRUE(flowing(run, 50)) << "nothing reaches the mock cluster:\n" << log_tail(run.pipeline.name + ".log");
  for (int b = 1; b <= kBrokers; ++b) {
    mock.fail_produce_on(
        b, {{RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION, 0}, {RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION, 0}});
  }
  // Leadership moves while the errors are answered: the producer must follow it.
  for (const auto& t : run.pipeline.topics()) {
    for (int part = 0; part < kPartitions; ++part) mock.set_leader(t, part, 1 + (part + 1) % kBrokers);
  }
  PGOUTBOX_ASSERT_EVENTUALLY(injected_errors_used_up(), 60s) << log_tail(run.pipeline.name + ".log");
  finish(run, "mock-not-leader");
}

// librdkafka's mock (2.8.0: rdkafka_mock.c, rd_kafka_mock_validate_records) checks sequence
// numbers only of a producer with a transactional id, so not pgoutbox's idempotent one: with
// several requests in flight, it appends the batch after one it refused with REQUEST_TIMED_OUT,
// and librdkafka, seeing a later sequence acknowledged, rightly concludes (for a real broker,
// which refuses gaps with OUT_OF_ORDER_SEQUENCE_NUMBER) that the refused batch was written: the
// mock then holds less than it acknowledged. One request in flight keeps the mock honest.
TEST_F(MockKafkaFaultTest, RequestTimedOut) {
  auto run = start("mock_timeout", {{"max.in.flight.requests.per.connection", "1"}});
  ASSERT_TRUE(flowing(run, 50)) << "nothing reaches the mock cluster:\n" << log_tail(run.pipeline.name + ".log");
  for (int b = 1; b <= kBrokers; ++b) {
    // The broker's own timeout error, twice, then an answer later than the client's request
    // timeout (3 s): the client gives up on it and sends the batch again.
    mock.fail_produce_on(b, {{RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, 0},
                             {RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, 500},
                             {RD_KAFKA_RESP_ERR_NO_ERROR, 4000}});
  }
  PGOUTBOX_ASSERT_EVENTUALLY(injected_errors_used_up(), 60s) << log_tail(run.pipeline.name + ".log");
  finish(run, "mock-request-timed-out");
}

// One request in flight, for the reason given above RequestTimedOut: the mock refuses one batch
// with OUT_OF_ORDER_SEQUENCE_NUMBER and, not checking an idempotent producer's sequences, appends
// the next one already in flight, where a real broker refuses it too (the sequence it expects is
// the refused batch's). A CI run under ASan saw exactly that: one key's seq 11 appended before
// its seq 9, which pgoutbox republished after the failed delivery restarted its session.
TEST_F(MockKafkaFaultTest, OutOfOrderSequenceNumber) {
  auto run = start("mock_sequence", {{"max.in.flight.requests.per.connection", "1"}});
  ASSERT_TRUE(flowing(run, 50)) << "nothing reaches the mock cluster:\n" << log_tail(run.pipeline.name + ".log");
  for (int b = 1; b <= kBrokers; ++b) mock.fail_produce_on(b, {{RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, 0}});
  PGOUTBOX_ASSERT_EVENTUALLY(injected_errors_used_up(), 60s) << log_tail(run.pipeline.name + ".log");
  finish(run, "mock-out-of-order-sequence");
}

// One request in flight, as for RequestTimedOut: a dropped connection makes librdkafka send a
// batch again, and with several in flight the gap-accepting mock may append a later batch
// first (a real broker refuses it with OUT_OF_ORDER_SEQUENCE_NUMBER). A clean-clone CI run on a
// loaded machine saw exactly that once: one key's seq 5 first delivered after its seq 6. The
// real-broker fault tests (broker stopped, hung) cover connection loss with the default of five.
TEST_F(MockKafkaFaultTest, BrokersDropConnectionsMidProduce) {
  auto run = start("mock_drop", {{"max.in.flight.requests.per.connection", "1"}});
  ASSERT_TRUE(flowing(run, 50)) << "nothing reaches the mock cluster:\n" << log_tail(run.pipeline.name + ".log");
  // _TRANSPORT makes the mock broker close the connection instead of answering the Produce.
  for (int b = 1; b <= kBrokers; ++b) {
    mock.fail_produce_on(b, {{RD_KAFKA_RESP_ERR__TRANSPORT, 0}, {RD_KAFKA_RESP_ERR__TRANSPORT, 0}});
  }
  PGOUTBOX_ASSERT_EVENTUALLY(injected_errors_used_up(), 60s) << log_tail(run.pipeline.name + ".log");
  // And one broker goes away altogether for a while, leaders and all.
  mock.set_down(1);
  const auto committed_at_down = run.writers->committed_count();
  PGOUTBOX_EXPECT_EVENTUALLY(run.writers->committed_count() >= committed_at_down + 30, 60s);
  mock.set_up(1);
  finish(run, "mock-connection-drops");
}

}  // namespace
}  // namespace pgoutbox::test
