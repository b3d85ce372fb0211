// docs/spec.md I13 against the fake sink (issue 36): a record a topic's limits refuse costs one
// poison.policy action before it is sent, never a Kafka transaction or a session; a topic whose
// limit is below the producer's batch.size rebuilds the producer at once; a refusal that slips
// through anyway is served at once (exactly-once: in the same session), never through the
// backoff; a checkpoint
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

// What the relay tells the metrics of each refusal it foresaw.
struct RefusalsHeard final : Observer {
  void event_refused_before_sending(std::string_view table, std::string_view topic, RefusalReason reason) override {
    heard.push_back({std::string(table), std::string(topic), reason});
  }
  struct Refusal {
    std::string table, topic;
    RefusalReason reason;
  };
  std::vector<Refusal> heard;
};

// An insert whose aggregateid (the record's key) is NULL.
Bytes insert_without_key(int n) {
  pgoutput::testing::MessageBuilder m('I');
  m.int32(kRelid).int8('N').int16(5);
  m.text_column(id(n)).text_column("E").null_column().text_column("Created").text_column("{}");
  return m;
}

class TopicLimitsTest : public ::testing::TestWithParam<config::Delivery> {};

// Without the topic's limits, exactly-once aborts a Kafka transaction per attempt (and a session
// each time) before the record reaches its policy; with them, it never enters the transaction.
TEST_P(TopicLimitsTest, ARecordAboveTheTopicsLimitIsDeadLetteredBeforeItIsSent) {
  Harness h(with(GetParam()));
  RefusalsHeard observer;
  h.observer = &observer;
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
  ASSERT_EQ(observer.heard.size(), 1U);
  EXPECT_EQ(observer.heard[0].table, "public.outbox");
  EXPECT_EQ(observer.heard[0].topic, kTopic);
  EXPECT_EQ(observer.heard[0].reason, RefusalReason::too_large);
  EXPECT_EQ(h.counters.dead_lettered, 1U);
  EXPECT_EQ(h.counters.records_acked, 4U);
  EXPECT_EQ(h.counters.kafka_transactions_aborted, 0U);
  EXPECT_EQ(produced_to(h.script, kTopic, id(3)), 0U) << "the oversized record was sent";
  EXPECT_EQ(produced_to(h.script, "dlq", id(3)), 1U);
  EXPECT_EQ(h.source.flush, Lsn{0x3000});
}

// A compacted topic refuses a record without a key (INVALID_RECORD): it is dead-lettered unsent,
// and the metrics hear why.
TEST_P(TopicLimitsTest, ARecordWithoutAKeyForACompactedTopicIsDeadLetteredBeforeItIsSent) {
  Harness h(with(GetParam()));
  RefusalsHeard observer;
  h.observer = &observer;
  h.topic_limits = limits(kLimit, true);
  h.batch_size = 12'000;
  h.source.push(relation());
  h.source.push(begin(0x1000 - 8, 1));
  h.source.push(insert(1));
  h.source.push(insert_without_key(2));
  h.source.push(commit(0x1000 - 8, 0x1000), Lsn{0x1000});
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  EXPECT_EQ(h.counters.refused_before_sending, 1U);
  EXPECT_EQ(h.counters.dead_lettered, 1U);
  EXPECT_EQ(produced_to(h.script, kTopic, id(2)), 0U) << "the record without a key was sent";
  ASSERT_EQ(observer.heard.size(), 1U);
  EXPECT_EQ(observer.heard[0].reason, RefusalReason::null_key_compacted);
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

// The ids of `topic`'s records a read_committed consumer reads, in order.
std::vector<std::string> committed_ids(const SinkScript& script, const std::string& topic) {
  std::vector<std::string> ids;
  for (const auto& r : script.committed) {
    if (r.topic == topic) ids.push_back(r.event_id);
  }
  return ids;
}

int aborts(const SinkScript& script) {
  return static_cast<int>(std::count(script.txn_calls.begin(), script.txn_calls.end(), "abort"));
}

kafka::DeliveryError policy_violation() {
  return {kafka::DeliveryFailure::permanent, "POLICY_VIOLATION", "Broker: Policy violation", false};
}

// A verdict: Kafka refuses the batch that holds event `n` for its size; `n` alone is taken.
std::function<std::optional<kafka::DeliveryError>(const Produced&)> batch_refused_with(int n) {
  return [n](const Produced& p) -> std::optional<kafka::DeliveryError> {
    if (p.record.event_id == id(n) && !p.cookie.isolated) return refused_for_size();
    return std::nullopt;
  };
}

// A refusal no limit foresaw (a broker policy): it is a record's, not an outage. Exactly-once
// aborts the transaction and publishes it again in the same session, the record alone, until the
// record meets poison.policy (max_retries 1: refused with its batch, then alone twice); no backoff,
// no new session, and the other records committed once, in order.
TEST(TopicLimitsExactlyOnce, ARefusalThatSlipsThroughIsServedInTheSameSession) {
  Harness h(with(config::Delivery::exactly_once));
  h.topic_limits = limits();
  h.batch_size = 12'000;
  h.script.verdict = [](const Produced& p) -> std::optional<kafka::DeliveryError> {
    if (p.record.event_id != id(2) || p.record.topic != kTopic) return std::nullopt;
    return policy_violation();
  };
  h.source.push(relation());
  h.txn(0x1000, 3, 1);
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  EXPECT_EQ(h.sessions, 1);
  EXPECT_EQ(aborts(h.script), 3);
  EXPECT_EQ(committed_ids(h.script, kTopic), (std::vector<std::string>{id(1), id(3)}));
  EXPECT_EQ(committed_ids(h.script, "dlq"), std::vector<std::string>{id(2)});
  EXPECT_EQ(h.counters.dead_lettered, 1U);
  EXPECT_EQ(h.source.flush, Lsn{0x1000});
}

// librdkafka purges a failed transaction's queued records (_PURGE_QUEUE) and may report them
// before the refused batch's own reports: the refusal still decides (the transaction published
// again at once, the suspect alone), not the first report (which made it a reconnect after the
// backoff). Kafka takes the suspect alone: it is forgotten, and everything is committed once.
TEST(TopicLimitsExactlyOnce, ARefusalReportedAfterPurgedRecordsIsStillServedInTheSession) {
  Harness h(with(config::Delivery::exactly_once));
  h.topic_limits = limits();
  h.batch_size = 12'000;
  h.script.verdict = [purged = false](const Produced& p) mutable -> std::optional<kafka::DeliveryError> {
    if (p.record.event_id == id(1) && !purged) {
      purged = true;
      return kafka::DeliveryError{kafka::DeliveryFailure::retriable, "_PURGE_QUEUE", "Local: Purged in queue", false};
    }
    if (p.record.event_id == id(2) && !p.cookie.isolated) return refused_for_size();
    return std::nullopt;
  };
  h.source.push(relation());
  h.txn(0x1000, 3, 1);
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  EXPECT_EQ(h.sessions, 1);
  EXPECT_EQ(aborts(h.script), 1);
  EXPECT_EQ(committed_ids(h.script, kTopic), (std::vector<std::string>{id(1), id(2), id(3)}));
  EXPECT_EQ(h.counters.dead_lettered, 0U);
  EXPECT_TRUE(h.refused->empty()) << "a record Kafka took alone is still a suspect";
}

// librdkafka's abort of a transaction with a refused batch leaves the producer's epoch as it was,
// and the transaction published again fails with OUT_OF_ORDER_SEQUENCE_NUMBER (its abort bumps
// the epoch). That echo of the refusal is published again too, in the same session; without it
// the session ended as an outage, through the backoff (relay_batch_refusal_test on Kafka 4.4).
TEST(TopicLimitsExactlyOnce, TheRefusalsEchoInTheNextTransactionIsPublishedAgainToo) {
  Harness h(with(config::Delivery::exactly_once));
  h.stop_when_done = true;
  h.script.refusal_echo = true;
  h.script.verdict = batch_refused_with(2);
  h.source.push(relation());
  h.txn(0x1000, 3, 1);
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  EXPECT_EQ(h.sessions, 1);
  EXPECT_EQ(aborts(h.script), 2);
  EXPECT_EQ(committed_ids(h.script, kTopic), (std::vector<std::string>{id(1), id(2), id(3)}));
  EXPECT_EQ(h.source.flush, Lsn{0x1000});
}

// librdkafka refuses every produce() into a transaction a refused batch doomed (_STATE) until
// it is aborted, the checkpoint's too when the commit comes before the refusal's report is
// served. The checkpoint is no record of the stream: the transaction is published again without
// it and its commit writes a new one. Before, the checkpoint went into the transaction published
// again as a record of a Postgres transaction, and the instance exited with an internal error
// ("ConfirmTracker: unknown transaction"; fault_topic_limit_test met it on Kafka 4.4 in 2 of 12 runs).
TEST(TopicLimitsExactlyOnce, ACheckpointRefusedInADoomedTransactionIsNotPublishedAgainAsARecord) {
  Harness h(with(config::Delivery::exactly_once));
  h.stop_when_done = true;
  h.script.doomed_state = true;
  // Kafka answers after the commit began (at the stop): the checkpoint meets the doomed
  // transaction; the abort serves the reports.
  h.script.hold = true;
  h.script.abort_result = [&h] {
    h.script.hold = false;
    return kafka::TxnResult{};
  };
  h.script.verdict = batch_refused_with(3);
  h.source.push(relation());
  h.txn(0x1000, 3, 1);
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  EXPECT_EQ(h.sessions, 1);
  EXPECT_EQ(committed_ids(h.script, kTopic), (std::vector<std::string>{id(1), id(2), id(3)}));
  EXPECT_EQ(std::count_if(h.script.committed.begin(), h.script.committed.end(),
                          [](const outbox::Record& r) { return r.event_id == "checkpoint"; }),
            1)
      << "the committed transaction holds one checkpoint, written last";
  EXPECT_EQ(h.source.flush, Lsn{0x1000});
}

// Issue 37 item 7: two rows of one transaction with the same event id and topic, one that Kafka
// refuses (a broker policy: no limit foresees it) and one it takes, are two records: the refused
// one meets poison.policy (dead-lettered), the other is delivered. Before, both shared one entry
// of the refusal memory (commit LSN, topic, event id), so the deliverable one was taken for the
// refused one and dead-lettered too.
TEST_P(TopicLimitsTest, TwoRowsWithOneIdAreTwoRecordsForTheRefusalMemory) {
  Harness h(with(GetParam()));
  h.batch_size = 12'000;
  h.script.verdict = [](const Produced& p) -> std::optional<kafka::DeliveryError> {
    if (p.record.topic != kTopic || p.record.value.find("refuse-me") == std::string::npos) return std::nullopt;
    return policy_violation();
  };
  h.source.push(relation());
  h.source.push(begin(0x1000 - 8, 0x1000));
  h.source.push(insert(1, "k", R"({"n":1})"));
  h.source.push(insert(2, "k", R"({"n":"refuse-me"})"));
  h.source.push(insert(2, "k", R"({"n":2})"));
  h.source.push(insert(3, "k", R"({"n":3})"));
  h.source.push(commit(0x1000 - 8, 0x1000), Lsn{0x1000});
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  std::vector<std::string> delivered;
  for (const auto& r : GetParam() == config::Delivery::exactly_once ? h.script.committed : h.script.landed) {
    if (r.topic == kTopic) delivered.push_back(r.value);
  }
  // At-least-once may deliver a record twice (the batch before the refusal); each once at least.
  for (const char* value : {R"({"n":1})", R"({"n":2})", R"({"n":3})"})
    EXPECT_NE(std::find(delivered.begin(), delivered.end(), value), delivered.end()) << value << " was not delivered";
  EXPECT_EQ(std::find(delivered.begin(), delivered.end(), R"({"n":"refuse-me"})"), delivered.end());
  EXPECT_EQ(h.counters.dead_lettered, 1U) << "only the refused row is dead-lettered";
  EXPECT_EQ(h.source.flush, Lsn{0x1000});
}

// Two failures in a row that teach nothing are not an echo: the session ends, through the backoff.
TEST(TopicLimitsExactlyOnce, AFailureAfterTheEchoEndsTheSession) {
  Harness h(with(config::Delivery::exactly_once));
  h.stop_when_done = false;
  h.at_once_restarts = 0;
  h.script.verdict = [n = 0](const Produced& p) mutable -> std::optional<kafka::DeliveryError> {
    if (p.record.event_id == id(2) && n++ == 0) return refused_for_size();
    return kafka::DeliveryError{kafka::DeliveryFailure::retriable, "REQUEST_TIMED_OUT", "Broker: Request timed out",
                                false};
  };
  h.source.push(relation());
  h.txn(0x1000, 3, 1);
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::reconnect) << outcome.reason;
  EXPECT_FALSE(outcome.at_once) << outcome.reason;
  EXPECT_EQ(aborts(h.script), 3) << "the refusal, its echo, then the end";
  EXPECT_TRUE(h.script.committed.empty());
}

// A Postgres transaction larger than the in-flight caps is not kept for publishing again (memory
// would grow with it): a refusal inside it restarts the session at once, from the slot.
TEST(TopicLimitsExactlyOnce, ARefusalInsideATransactionLargerThanTheCapsRestartsFromTheSlot) {
  auto config = with(config::Delivery::exactly_once);
  config.limits.max_in_flight_records = 2;
  Harness h(config);
  h.stop_when_done = false;
  h.at_once_restarts = 0;
  h.script.verdict = [](const Produced& p) -> std::optional<kafka::DeliveryError> {
    if (p.record.event_id != id(3)) return std::nullopt;
    return policy_violation();
  };
  h.source.push(relation());
  h.txn(0x1000, 4, 1);
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::reconnect) << outcome.reason;
  EXPECT_TRUE(outcome.at_once) << outcome.reason;
  EXPECT_NE(outcome.reason.find("POLICY_VIOLATION"), std::string::npos) << outcome.reason;
  EXPECT_EQ(h.refused->size(), 1U) << "the suspect is remembered for the next session";
}

// An abort that does not go through leaves no transaction to publish again in: the session ends
// (at once), and the next one publishes it from the slot.
TEST(TopicLimitsExactlyOnce, ARefusalWhoseAbortFailsRestartsFromTheSlot) {
  Harness h(with(config::Delivery::exactly_once));
  h.stop_when_done = false;
  h.at_once_restarts = 0;
  h.script.abort_result = [] { return kafka::TxnResult{kafka::TxnStatus::retry, "Local: Timed out"}; };
  h.script.verdict = [](const Produced& p) -> std::optional<kafka::DeliveryError> {
    if (p.record.event_id != id(2)) return std::nullopt;
    return policy_violation();
  };
  h.source.push(relation());
  h.txn(0x1000, 3, 1);
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::reconnect) << outcome.reason;
  EXPECT_TRUE(outcome.at_once) << outcome.reason;
  EXPECT_EQ(aborts(h.script), 1);
  EXPECT_TRUE(h.script.committed.empty());
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
