// The real sink (kafka::Producer behind kafka::Sink) on what librdkafka decides locally, without
// a broker: a record larger than the producer's whole queue is refused for its size rather than
// reported as a full queue forever (issue 12 #6).

#include <gtest/gtest.h>

#include "pgoutbox/config/kafka_properties.h"
#include "pgoutbox/kafka/producer.h"
#include "pgoutbox/kafka/producer_sink.h"

namespace pgoutbox::kafka {
namespace {

TEST(ProducerSink, AFullQueueWithRecordsQueuedIsAWait) {
  SinkSettings settings;
  settings.brokers = "127.0.0.1:1";  // nothing listens: nothing here needs a broker
  settings.properties = {{"queue.buffering.max.kbytes", "1024"}, {"message.max.bytes", "10000000"}};
  auto sink = producer_sink_factory(settings)(SinkOptions{false, [](const Delivery&) {}, {}, {}, {}});
  outbox::Record half;
  half.topic = "t";
  half.value.assign(600 << 10, 'x');
  DeliveryError error;
  EXPECT_EQ(sink->produce(half, 1, error), Sink::Produced::ok);
  // It fits an empty queue, and the queue drains once Kafka answers: a wait, not a refusal.
  EXPECT_EQ(sink->produce(half, 2, error), Sink::Produced::queue_full);
}

TEST(ProducerSink, ARecordLargerThanTheEmptyQueueIsRefusedForItsSize) {
  SinkSettings settings;
  settings.brokers = "127.0.0.1:1";
  settings.properties = {{"queue.buffering.max.kbytes", "1024"}, {"message.max.bytes", "10000000"}};
  auto sink = producer_sink_factory(settings)(SinkOptions{false, [](const Delivery&) {}, {}, {}, {}});
  outbox::Record big;
  big.topic = "t";
  big.value.assign(2 << 20, 'x');
  DeliveryError error;
  ASSERT_EQ(sink->produce(big, 1, error), Sink::Produced::failed);
  EXPECT_EQ(error.kind, DeliveryFailure::permanent);
  EXPECT_TRUE(error.size_refusal);
  EXPECT_EQ(error.code, "_QUEUE_FULL");
}

// The producer refuses exactly what the configuration loader refuses: one list.
TEST(ProducerSink, TheProducerEnforcesTheLoadersListOfFixedProperties) {
  for (const auto& fixed : config::fixed_kafka_properties()) {
    SCOPED_TRACE(std::string(fixed.name));
    ProducerSettings settings;
    settings.brokers = "127.0.0.1:1";
    EXPECT_EQ(effective_properties(settings).at(std::string(fixed.name)), fixed.value);
    settings.properties = {{std::string(fixed.name), "1"}};
    EXPECT_TRUE(config::refuse_kafka_property(fixed.name, "1"));
    EXPECT_THROW(effective_properties(settings), std::invalid_argument);
    settings.properties = {{std::string(fixed.name), std::string(fixed.value)}};
    EXPECT_NO_THROW(effective_properties(settings));
  }
  EXPECT_FALSE(config::refuse_kafka_property("acks", "-1"));
  EXPECT_FALSE(config::refuse_kafka_property("linger.ms", "100"));
}

}  // namespace
}  // namespace pgoutbox::kafka
