// docs/spec.md I13 against the fake sink (issue 36): a record a topic's limits refuse costs one
// poison.policy action before it is sent, never a Kafka transaction or a session; a topic whose
// limit is below the producer's batch.size rebuilds the producer at once; a refusal that slips
// through anyway restarts the session at once instead of through the backoff; a checkpoint
// topic that refuses pgoutbox's writes stops it with exit 24 instead of retrying forever.

#include <gtest/gtest.h>

#include <algorithm>

#include "relay_fakes.h"

namespace pgoutbox::relay {
namespace {

using namespace pgoutbox::relay::testing;

constexpr std::size_t kLimit = 16'384;
const std::string kTopic = "outbox.event.E";

config::Config with(config::Delivery delivery) {
  auto c = test_config();
  c.delivery = delivery;
  c.kafka.transaction_interval = 50ms;
  c.poison.policy = config::PoisonPolicy::dead_letter;
  c.poison.max_retries = 1;
  return c;
}

std::string id(int n) { return fmt::format("00000000-0000-0000-0000-{:012d}", n); }

// A payload that compresses poorly: about `bytes` bytes whatever the codec.
std::string incompressible(std::size_t bytes) {
  std::string s = "{\"blob\": \"";
  std::uint64_t x = 88172645463325252ULL;
  while (s.size() < bytes) {
    x ^= x << 13U;
    x ^= x >> 7U;
    x ^= x << 17U;
    s += "0123456789abcdefghijklmnopqrstuvwxyz"[x % 36];
  }
  return s + "\"}";
}

// The broker's side: a record (alone or in its batch) above the topic's limit is refused.
std::optional<kafka::DeliveryError> broker(const Produced& p) {
  if (p.record.topic == kTopic && p.record.value.size() > kLimit) return refused_for_size();
  return std::nullopt;
}

std::shared_ptr<kafka::FixedTopicLimits> limits(std::size_t max_message_bytes = kLimit, bool compacted = false) {
  return std::make_shared<kafka::FixedTopicLimits>(std::map<std::string, kafka::TopicLimit>{
      {kTopic, {max_message_bytes, compacted, kafka::TopicLimit::Source::topic}}});
}

std::size_t produced_to(const SinkScript& script, const std::string& topic, const std::string& event_id) {
  return static_cast<std::size_t>(std::count_if(script.produced.begin(), script.produced.end(), [&](const Produced& p) {
    return p.record.topic == topic && p.record.event_id == event_id;
  }));
}

class TopicLimitsTest : public ::testing::TestWithParam<config::Delivery> {};

// Without the topic's limits, exactly-once aborts a Kafka transaction per attempt (and a session
// each time) before the record reaches its policy; with them, it never enters the transaction.
TEST_P(TopicLimitsTest, ARecordAboveTheTopicsLimitIsDeadLetteredBeforeItIsSent) {
  Harness h(with(GetParam()));
  h.topic_limits = limits();
  h.batch_size = 12'000;
  h.script.verdict = broker;
  h.source.push(relation());
  h.txn(0x1000, 2, 1);
  h.txn(0x2000, 1, 3, incompressible(24 * 1024));
  h.txn(0x3000, 2, 4);
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  EXPECT_EQ(h.counters.refused_before_sending, 1U);
  EXPECT_EQ(h.counters.dead_lettered, 1U);
  EXPECT_EQ(h.counters.records_acked, 4U);
  EXPECT_EQ(h.counters.kafka_transactions_aborted, 0U);
  EXPECT_EQ(produced_to(h.script, kTopic, id(3)), 0U) << "the oversized record was sent";
  EXPECT_EQ(produced_to(h.script, "dlq", id(3)), 1U);
  EXPECT_EQ(h.source.flush, Lsn{0x3000});
}

// A record that compresses under the limit is the broker's to take (lz4, pgoutbox's default).
TEST_P(TopicLimitsTest, ARecordThatCompressesUnderTheLimitIsSent) {
  Harness h(with(GetParam()));
  h.topic_limits = limits();
  h.batch_size = 12'000;
  h.source.push(relation());
  h.txn(0x1000, 1, 1, "{\"blob\": \"" + std::string(40'000, 'a') + "\"}");
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  EXPECT_EQ(h.counters.refused_before_sending, 0U);
  EXPECT_EQ(h.counters.records_acked, 1U);
}

// A topic first produced to (a template's) whose limit is below this session's batch.size: its
// batches could be refused whole, so the session ends at once, before the record is sent, and
// the next one's producers keep under the limit.
TEST_P(TopicLimitsTest, ATopicWhoseLimitIsBelowTheBatchSizeRebuildsTheProducerAtOnce) {
  Harness h(with(GetParam()));
  h.topic_limits = limits();
  h.batch_size = 1'000'000;
  h.stop_when_done = false;
  h.at_once_restarts = 0;
  h.source.push(relation());
  h.txn(0x1000, 2, 1);
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::reconnect) << outcome.reason;
  EXPECT_TRUE(outcome.at_once) << outcome.reason;
  EXPECT_NE(outcome.reason.find("max.message.bytes"), std::string::npos) << outcome.reason;
  EXPECT_EQ(produced_to(h.script, kTopic, id(1)), 0U);
  EXPECT_EQ(h.source.flush, Lsn{0x100}) << "confirmed past a record that was never sent";
}

// A refusal no limit foresaw (a broker policy): it is a record's, not an outage. Exactly-once
// aborts the transaction and the next session starts at once; the backoff is for causes that
// can heal.
TEST(TopicLimitsExactlyOnce, ARefusalThatSlipsThroughRestartsTheSessionAtOnce) {
  Harness h(with(config::Delivery::exactly_once));
  h.topic_limits = limits();
  h.batch_size = 12'000;
  h.stop_when_done = false;
  h.at_once_restarts = 0;
  h.script.verdict = [](const Produced& p) -> std::optional<kafka::DeliveryError> {
    if (p.record.event_id != id(2)) return std::nullopt;
    return kafka::DeliveryError{kafka::DeliveryFailure::permanent, "POLICY_VIOLATION", "Broker: Policy violation",
                                false};
  };
  h.source.push(relation());
  h.txn(0x1000, 3, 1);
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::reconnect) << outcome.reason;
  EXPECT_TRUE(outcome.at_once) << outcome.reason;
  EXPECT_NE(outcome.reason.find("POLICY_VIOLATION"), std::string::npos) << outcome.reason;
}

// librdkafka purges a failed transaction's queued records (_PURGE_QUEUE) and may report them
// before the refused batch's own reports: the refusal still decides (a restart at once, the
// suspect remembered), not the first report (which made it a reconnect after the backoff).
TEST(TopicLimitsExactlyOnce, ARefusalReportedAfterPurgedRecordsStillRestartsAtOnce) {
  Harness h(with(config::Delivery::exactly_once));
  h.topic_limits = limits();
  h.batch_size = 12'000;
  h.stop_when_done = false;
  h.at_once_restarts = 0;
  h.script.verdict = [](const Produced& p) -> std::optional<kafka::DeliveryError> {
    if (p.record.event_id == id(1))
      return kafka::DeliveryError{kafka::DeliveryFailure::retriable, "_PURGE_QUEUE", "Local: Purged in queue", false};
    if (p.record.event_id == id(2)) return refused_for_size();
    return std::nullopt;
  };
  h.source.push(relation());
  h.txn(0x1000, 3, 1);
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::reconnect) << outcome.reason;
  EXPECT_TRUE(outcome.at_once) << outcome.reason;
  EXPECT_NE(outcome.reason.find("MSG_SIZE_TOO_LARGE"), std::string::npos) << outcome.reason;
  EXPECT_EQ(h.refused->size(), 1U);
}

// A checkpoint topic the principal may not write: retried forever, exactly-once could commit
// nothing and at-least-once would go without its checkpoint, silently. It stops, naming the
// topic and the fix.
TEST_P(TopicLimitsTest, ACheckpointTopicThatRefusesWritesStopsWithExit24) {
  Harness h(with(GetParam()));
  h.config.checkpoint.interval = 10ms;
  h.checkpoints = [] { return kafka::CheckpointScan{}; };
  h.stop_when_done = false;
  h.script.verdict = [](const Produced& p) -> std::optional<kafka::DeliveryError> {
    if (p.record.topic != "pgoutbox.checkpoints") return std::nullopt;
    return kafka::DeliveryError{kafka::DeliveryFailure::permanent, "TOPIC_AUTHORIZATION_FAILED",
                                "Broker: Topic authorization failed", false};
  };
  h.source.push(relation());
  h.txn(0x1000, 2, 1);
  const auto outcome = h.run();
  ASSERT_EQ(outcome.kind, Outcome::Kind::fatal) << outcome.reason;
  EXPECT_EQ(exit_code(outcome.cause), 24);
  EXPECT_NE(outcome.reason.find("pgoutbox.checkpoints"), std::string::npos) << outcome.reason;
  EXPECT_NE(outcome.reason.find("kafka-acls.sh"), std::string::npos) << outcome.reason;
}

// A topic the broker did not know yet (created a moment ago, or by its first record) has the
// broker's default only until the broker knows it: its own policy is read a second later, so a
// keyless record bound for it is refused locally from then on, not by the broker.
TEST(TopicLimitsCache, ATopicTheBrokerDidNotKnowIsReadAgainWithinASecond) {
  kafka::FixedTopicLimits limits({}, {kafka::kKafkaDefaultMaxMessageBytes, false, kafka::TopicLimit::Source::broker});
  EXPECT_FALSE(limits.of("new").compacted);
  limits.set("new", {kafka::kKafkaDefaultMaxMessageBytes, true, kafka::TopicLimit::Source::topic});
  limits.advance(500ms);
  EXPECT_FALSE(limits.of("new").compacted) << "asked again within the interval";
  limits.advance(600ms);
  EXPECT_TRUE(limits.of("new").compacted);
  EXPECT_EQ(limits.reads(), 2);
  limits.advance(std::chrono::hours(1));
  EXPECT_TRUE(limits.of("new").compacted);
  EXPECT_EQ(limits.reads(), 2) << "a topic's own figures are final";
}

// A limit that could not be read (no answer, no DESCRIBE_CONFIGS right) is asked again a minute later.
TEST(TopicLimitsCache, AnUnreadLimitIsReadAgainAfterAMinute) {
  kafka::FixedTopicLimits limits({});
  limits.of("t");
  limits.advance(30s);
  limits.of("t");
  EXPECT_EQ(limits.reads(), 1);
  limits.advance(31s);
  limits.of("t");
  EXPECT_EQ(limits.reads(), 2);
}

INSTANTIATE_TEST_SUITE_P(BothModes, TopicLimitsTest,
                         ::testing::Values(config::Delivery::at_least_once, config::Delivery::exactly_once),
                         [](const auto& mode) {
                           return mode.param == config::Delivery::exactly_once ? "ExactlyOnce" : "AtLeastOnce";
                         });

}  // namespace
}  // namespace pgoutbox::relay
