// The topics' limits against a real Kafka 4.4 (docs/spec.md I13, issue 36): what DescribeConfigs
// gives pgoutbox, whether its size of a record's batch is the broker's to the byte, and that a
// producer keeping its batches under a topic's max.message.bytes is never refused a batch, where
// one with librdkafka's default batch.size is.

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "kafka_broker.h"
#include "kafka_client.h"
#include "pgoutbox/kafka/producer.h"
#include "pgoutbox/kafka/record_size.h"
#include "pgoutbox/kafka/topic_limits.h"
#include "services.h"

namespace pgoutbox::kafka {
namespace {

using namespace std::chrono_literals;

test::KafkaBroker& broker() { return test::shared_kafka(); }

struct Sent {
  std::size_t acknowledged = 0;
  std::size_t refused_for_size = 0;
  std::vector<std::string> errors;
};

// Produces `records` through a pgoutbox producer of `settings` and waits for every report.
Sent produce_all(ProducerSettings settings, const std::vector<outbox::Record>& records) {
  Sent sent;
  settings.brokers = broker().bootstrap();
  Producer producer(settings, [&sent](const DeliveryReport& r) {
    if (r.ok()) {
      ++sent.acknowledged;
    } else {
      if (r.error == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE) ++sent.refused_for_size;
      sent.errors.push_back(rd_kafka_err2name(r.error));
    }
  });
  std::uint64_t cookie = 0;
  for (const auto& r : records) {
    rd_kafka_resp_err_t error = RD_KAFKA_RESP_ERR_NO_ERROR;
    while (producer.produce(r, ++cookie, error) == Producer::Produced::queue_full) producer.poll(10ms);
  }
  EXPECT_TRUE(producer.flush(60s));
  return sent;
}

outbox::Record record(const std::string& topic, std::size_t value_bytes, int n = 0) {
  outbox::Record r;
  r.topic = topic;
  r.key = "key-" + std::to_string(n % 7);
  r.value = std::string(value_bytes, static_cast<char>('a' + n % 26));
  r.event_id = "id-" + std::to_string(n);
  r.headers = {{"id", r.event_id}, {"type", "Created"}};
  return r;
}

TEST(TopicLimitsOnKafka, DescribeConfigsGivesTheTopicsLimitAndPolicyAndTheBrokersDefaultForAMissingTopic) {
  test::create_topic(broker().bootstrap(), "limits.small", 1, {{"max.message.bytes", "16384"}});
  test::create_topic(broker().bootstrap(), "limits.compacted", 1, {{"cleanup.policy", "compact"}});
  const auto limits = cluster_topic_limits(broker().bootstrap(), {});
  const auto small = limits->of("limits.small");
  EXPECT_EQ(small.max_message_bytes, 16'384U);
  EXPECT_FALSE(small.compacted);
  EXPECT_EQ(small.source, TopicLimit::Source::topic);
  const auto compacted = limits->of("limits.compacted");
  EXPECT_TRUE(compacted.compacted);
  EXPECT_EQ(compacted.max_message_bytes, kKafkaDefaultMaxMessageBytes);
  const auto missing = limits->of("limits.not-there-yet");
  EXPECT_EQ(missing.source, TopicLimit::Source::broker);
  EXPECT_EQ(missing.max_message_bytes, kKafkaDefaultMaxMessageBytes);
  EXPECT_EQ(limits->smallest(), 16'384U);
}

// batch_bytes() is what the broker measures: a record whose one-record batch is exactly the
// topic's limit is taken, one a byte larger is refused.
TEST(TopicLimitsOnKafka, TheSizeOfARecordsBatchIsTheBrokersToTheByte) {
  constexpr std::size_t kLimit = 8'000;
  test::create_topic(broker().bootstrap(), "limits.exact", 1, {{"max.message.bytes", std::to_string(kLimit)}});
  auto fits = record("limits.exact", 100);
  fits.value.resize(fits.value.size() + (kLimit - batch_bytes(fits, "none")), 'x');
  ASSERT_EQ(batch_bytes(fits, "none"), kLimit);
  auto over = fits;
  over.value.push_back('x');
  EXPECT_TRUE(predicted_refusal(over, {kLimit, false, TopicLimit::Source::topic}, "none"));
  EXPECT_FALSE(predicted_refusal(fits, {kLimit, false, TopicLimit::Source::topic}, "none"));
  ProducerSettings settings;
  settings.properties = {{"compression.type", "none"}, {"linger.ms", "0"}};
  const auto taken = produce_all(settings, {fits});
  EXPECT_EQ(taken.acknowledged, 1U) << (taken.errors.empty() ? "" : taken.errors.front());
  const auto refused = produce_all(settings, {over});
  EXPECT_EQ(refused.refused_for_size, 1U);
}

// The refusal: every record fits, but librdkafka's batches (up to batch.size, 1 MB by
// default) do not, and the broker refuses each whole. Kept under the limit, none is refused.
TEST(TopicLimitsOnKafka, BatchesKeptUnderTheTopicsLimitAreNeverRefused) {
  constexpr std::size_t kLimit = 16'384;
  test::create_topic(broker().bootstrap(), "limits.batches", 3, {{"max.message.bytes", std::to_string(kLimit)}});
  std::vector<outbox::Record> records;
  for (int i = 0; i < 3'000; ++i) records.push_back(record("limits.batches", 400, i));
  ProducerSettings settings;
  settings.properties = {{"compression.type", "none"}, {"linger.ms", "20"}};
  const auto unbounded = produce_all(settings, records);
  EXPECT_GT(unbounded.refused_for_size, 0U) << "librdkafka's default batches all fitted: the case shows nothing";
  settings.batch_limit = kLimit;
  EXPECT_EQ(effective_batch_size(settings), batch_size_under(kLimit));
  const auto bounded = produce_all(settings, records);
  EXPECT_EQ(bounded.refused_for_size, 0U);
  EXPECT_EQ(bounded.acknowledged, records.size());
  // With compression, batch.size counts the records before it: the compressed batch is smaller.
  settings.properties["compression.type"] = "lz4";
  const auto compressed = produce_all(settings, records);
  EXPECT_EQ(compressed.acknowledged, records.size());
}

// A limit below 1,024 bytes (batch.size once stopped there, over such a limit): batches of
// small records stay under it, and a record that fits the limit alone is taken alone.
TEST(TopicLimitsOnKafka, BatchesStayUnderATopicLimitOfLessThanAKilobyte) {
  constexpr std::size_t kLimit = 600;
  test::create_topic(broker().bootstrap(), "limits.tiny", 1, {{"max.message.bytes", std::to_string(kLimit)}});
  std::vector<outbox::Record> records;
  for (int i = 0; i < 300; ++i) records.push_back(record("limits.tiny", 40, i));
  auto alone = record("limits.tiny", 40, 300);
  alone.value.resize(alone.value.size() + (kLimit - batch_bytes(alone, "none")), 'x');
  while (batch_bytes(alone, "none") > kLimit) alone.value.pop_back();  // the value's length took a byte more
  ASSERT_EQ(batch_bytes(alone, "none"), kLimit);
  records.insert(records.begin() + 150, alone);
  ProducerSettings settings;
  settings.properties = {{"compression.type", "none"}, {"linger.ms", "20"}};
  settings.batch_limit = kLimit;
  const auto bounded = produce_all(settings, records);
  EXPECT_EQ(bounded.refused_for_size, 0U) << (bounded.errors.empty() ? "" : bounded.errors.front());
  EXPECT_EQ(bounded.acknowledged, records.size());
}

// docs/spec.md I4 after a batch Kafka refuses for good: without enable.gapless.guarantee,
// librdkafka bumps the idempotent producer's epoch and writes the partition's later batches, so a
// refused record sent again lands after later records of its key. With it (the stream's producer
// in at-least-once, SinkOptions::gapless), the producer stops at the refused batch: in every
// partition, nothing produced after a refused record is written, and the fatal error names it.
TEST(TopicLimitsOnKafka, AGaplessProducerWritesNothingOfAPartitionAfterABatchItRefused) {
  constexpr std::size_t kLimit = 16'384;
  test::create_topic(broker().bootstrap(), "limits.gapless", 3, {{"max.message.bytes", std::to_string(kLimit)}});
  ProducerSettings settings;
  settings.brokers = broker().bootstrap();
  // Batches of 50 records: 50 of 400 bytes (20 KB, refused), then 50 of 10 bytes (taken), in
  // turn, so that a partition's taken batches are in flight behind its refused ones.
  settings.properties = {{"compression.type", "none"},
                         {"linger.ms", "20"},
                         {"batch.num.messages", "50"},
                         {"enable.gapless.guarantee", "true"}};
  std::map<std::uint64_t, DeliveryReport> reports;
  Producer producer(settings, [&reports](const DeliveryReport& r) { reports[r.cookie] = r; });
  constexpr int kRecords = 3'000;
  std::uint64_t produced = 0;
  for (int i = 0; i < kRecords; ++i) {
    rd_kafka_resp_err_t error = RD_KAFKA_RESP_ERR_NO_ERROR;
    Producer::Produced result;
    auto r = record("limits.gapless", (i / 50) % 2 == 0 ? 400 : 10, i);
    r.key = "key-" + std::to_string(i / 100);  // each group of 100 records is one key's
    while ((result = producer.produce(r, produced + 1, error)) == Producer::Produced::queue_full) producer.poll(10ms);
    if (result != Producer::Produced::ok) break;  // the producer stopped: nothing more is taken
    ++produced;
  }
  // After the stop, librdkafka purges what it still held; a record it re-queued after the purge
  // would wait for message.timeout.ms, so reports are awaited until they stop coming.
  auto quiet_since = std::chrono::steady_clock::now();
  std::size_t seen = 0;
  while (reports.size() < produced && std::chrono::steady_clock::now() - quiet_since < 3s) {
    producer.poll(50ms);
    if (reports.size() != seen) {
      seen = reports.size();
      quiet_since = std::chrono::steady_clock::now();
    }
  }
  const auto fatal = producer.fatal();
  ASSERT_TRUE(fatal) << "no batch was refused: the case shows nothing";
  EXPECT_EQ(fatal->kind, SinkFatal::Kind::gap) << fatal->text;
  std::map<std::int32_t, std::uint64_t> first_refused;  // partition -> cookie
  std::size_t refused_for_size = 0;
  for (const auto& [cookie, r] : reports) {
    if (r.error == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE) {
      ++refused_for_size;
      first_refused.try_emplace(r.partition, cookie);
    }
  }
  EXPECT_GT(refused_for_size, 0U);
  for (const auto& [cookie, r] : reports) {
    if (!r.ok()) continue;
    const auto it = first_refused.find(r.partition);
    EXPECT_TRUE(it == first_refused.end() || cookie < it->second)
        << "record " << cookie << " was written to partition " << r.partition << " after record " << it->second
        << " was refused there";
  }
}

// A user's batch.size below the limit is kept; one above it is lowered.
TEST(TopicLimitsOnKafka, TheUsersSmallerBatchSizeIsKept) {
  ProducerSettings settings;
  settings.properties = {{"batch.size", "4000"}};
  settings.batch_limit = 16'384;
  EXPECT_EQ(effective_batch_size(settings), 4'000U);
  settings.properties = {{"batch.size", "500000"}};
  EXPECT_EQ(effective_batch_size(settings), batch_size_under(16'384));
  settings.batch_limit = 0;
  EXPECT_EQ(effective_batch_size(settings), 500'000U);
}

TEST(TopicLimitsOnKafka, ACompactedTopicRefusesARecordWithoutAKeyBeforeItIsSent) {
  auto r = record("limits.compacted", 10);
  r.key.reset();
  const auto refusal = predicted_refusal(r, {kKafkaDefaultMaxMessageBytes, true, TopicLimit::Source::topic}, "lz4");
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->code, "INVALID_RECORD");
  EXPECT_FALSE(predicted_refusal(record("limits.compacted", 10), {kKafkaDefaultMaxMessageBytes, true}, "lz4"));
  // The broker's own verdict on it, which the prediction stands for.
  test::create_topic(broker().bootstrap(), "limits.compacted", 1, {{"cleanup.policy", "compact"}});
  const auto sent = produce_all(ProducerSettings{}, {r});
  EXPECT_EQ(sent.acknowledged, 0U);
  ASSERT_EQ(sent.errors.size(), 1U);
  EXPECT_EQ(sent.errors.front(), refusal->code);
}

}  // namespace
}  // namespace pgoutbox::kafka
