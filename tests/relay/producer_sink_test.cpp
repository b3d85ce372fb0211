// The real sink (kafka::Producer behind kafka::Sink) on what librdkafka decides locally, without
// a broker: a record larger than the producer's whole queue is refused for its size rather than
// reported as a full queue forever (issue 12 #6).

#include <gtest/gtest.h>

#include "pgoutbox/kafka/producer_sink.h"

namespace pgoutbox::kafka {
namespace {

TEST(ProducerSink, AFullQueueWithRecordsQueuedIsAWait) {
  SinkSettings settings;
  settings.brokers = "127.0.0.1:1";  // nothing listens: nothing here needs a broker
  settings.properties = {{"queue.buffering.max.kbytes", "1024"}, {"message.max.bytes", "10000000"}};
  auto sink = producer_sink_factory(settings)(SinkOptions{false, [](const Delivery&) {}, {}, {}});
  outbox::Record small;
  small.topic = "t";
  small.value = "{}";
  DeliveryError error;
  EXPECT_EQ(sink->produce(small, 1, error), Sink::Produced::ok);

  outbox::Record big = small;
  big.value.assign(2 << 20, 'x');
  // With a record queued, a full queue can drain: that is a wait, not a refusal.
  EXPECT_EQ(sink->produce(big, 2, error), Sink::Produced::queue_full);
}

TEST(ProducerSink, ARecordLargerThanTheEmptyQueueIsRefusedForItsSize) {
  SinkSettings settings;
  settings.brokers = "127.0.0.1:1";
  settings.properties = {{"queue.buffering.max.kbytes", "1024"}, {"message.max.bytes", "10000000"}};
  auto sink = producer_sink_factory(settings)(SinkOptions{false, [](const Delivery&) {}, {}, {}});
  outbox::Record big;
  big.topic = "t";
  big.value.assign(2 << 20, 'x');
  DeliveryError error;
  ASSERT_EQ(sink->produce(big, 1, error), Sink::Produced::failed);
  EXPECT_EQ(error.kind, DeliveryFailure::permanent);
  EXPECT_TRUE(error.size_refusal);
  EXPECT_EQ(error.code, "_QUEUE_FULL");
}

}  // namespace
}  // namespace pgoutbox::kafka
