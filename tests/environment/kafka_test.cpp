// The real broker speaks what pgoutbox needs from the linked librdkafka (2.8.0): the idempotent
// producer (InitProducerId) with acks=all and lz4, and the classic group consumer (JoinGroup).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kafka_client.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

struct DeliveryTally {
  std::atomic<int> ok{0};
  std::atomic<int> failed{0};
};

void on_delivery(rd_kafka_t*, const rd_kafka_message_t* msg, void* opaque) {
  auto* tally = static_cast<DeliveryTally*>(opaque);
  (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR ? tally->ok : tally->failed).fetch_add(1);
}

TEST(KafkaEnvironment, IdempotentLz4ProducerRoundTripsThroughAGroupConsumer) {
  auto& kafka = shared_kafka();
  const std::string topic = "env-roundtrip";
  create_topic(kafka.bootstrap(), topic, 3);

  std::mutex log_mutex;
  std::vector<std::string> feature_log;
  DeliveryTally tally;
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (const auto& [k, v] : std::map<std::string, std::string>{{"bootstrap.servers", kafka.bootstrap()},
                                                               {"enable.idempotence", "true"},
                                                               {"acks", "all"},
                                                               {"compression.type", "lz4"},
                                                               {"linger.ms", "5"},
                                                               {"debug", "feature,eos"}}) {
    ASSERT_EQ(rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err), RD_KAFKA_CONF_OK) << err;
  }
  rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
  rd_kafka_conf_set_opaque(conf, &tally);
  struct Captured {
    std::mutex* mutex;
    std::vector<std::string>* lines;
  };
  // The log callback has no opaque of its own; the producer's opaque is the tally, so capture
  // through a static pointer for this one test.
  static Captured* captured = nullptr;
  Captured here{&log_mutex, &feature_log};
  captured = &here;
  rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t*, int, const char* fac, const char* buf) {
    std::lock_guard lock(*captured->mutex);
    captured->lines->push_back(std::string(fac) + ": " + buf);
  });
  RdKafkaPtr producer(rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err));
  ASSERT_TRUE(producer) << err;

  constexpr int kRecords = 3000;
  std::map<std::string, std::vector<std::string>> sent_by_key;
  for (int i = 0; i < kRecords; ++i) {
    const std::string key = "key-" + std::to_string(i % 50);
    const std::string value = "value-" + std::to_string(i) + std::string(100, 'x');
    sent_by_key[key].push_back(value);
    rd_kafka_resp_err_t rc;
    while ((rc = rd_kafka_producev(
                producer.get(), RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_KEY(key.data(), key.size()),
                RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
      rd_kafka_poll(producer.get(), 10);
    }
    ASSERT_EQ(rc, RD_KAFKA_RESP_ERR_NO_ERROR) << rd_kafka_err2str(rc);
    rd_kafka_poll(producer.get(), 0);
  }
  ASSERT_EQ(rd_kafka_flush(producer.get(), 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
  EXPECT_EQ(tally.ok.load(), kRecords);
  EXPECT_EQ(tally.failed.load(), 0);
  char fatal[256];
  EXPECT_EQ(rd_kafka_fatal_error(producer.get(), fatal, sizeof fatal), RD_KAFKA_RESP_ERR_NO_ERROR) << fatal;
  producer.reset();
  captured = nullptr;

  // librdkafka names the features it enabled for this broker; idempotence needs this one, and
  // with debug=eos it logs the producer id the broker assigned.
  bool idempotent_feature = false;
  bool got_pid = false;
  for (const auto& line : feature_log) {
    if (line.find("Enabling feature IdempotentProducer") != std::string::npos) idempotent_feature = true;
    if (line.find("Acquired PID{Id:") != std::string::npos) got_pid = true;
  }
  std::string all;
  for (const auto& line : feature_log) all += line + "\n";
  EXPECT_TRUE(idempotent_feature) << all;
  EXPECT_TRUE(got_pid) << all;

  // A group consumer (JoinGroup/SyncGroup) reads everything back, per key in order.
  auto consumer = make_client(RD_KAFKA_CONSUMER, {{"bootstrap.servers", kafka.bootstrap()},
                                                  {"group.id", "env-roundtrip-group"},
                                                  {"auto.offset.reset", "earliest"},
                                                  {"enable.auto.commit", "false"}});
  rd_kafka_poll_set_consumer(consumer.get());
  auto* subscription = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(subscription, topic.c_str(), RD_KAFKA_PARTITION_UA);
  ASSERT_EQ(rd_kafka_subscribe(consumer.get(), subscription), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_topic_partition_list_destroy(subscription);

  std::map<std::string, std::vector<std::string>> got_by_key;
  int got = 0;
  std::string last_error;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (got < kRecords && std::chrono::steady_clock::now() < deadline) {
    rd_kafka_message_t* msg = rd_kafka_consumer_poll(consumer.get(), 500);
    if (msg == nullptr) continue;
    if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      const auto rec = to_record(msg);
      got_by_key[*rec.key].push_back(*rec.value);
      ++got;
    } else {
      last_error = rd_kafka_message_errstr(msg);
    }
    rd_kafka_message_destroy(msg);
  }
  EXPECT_EQ(rd_kafka_commit(consumer.get(), nullptr, 0), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_consumer_close(consumer.get());
  ASSERT_EQ(got, kRecords) << last_error;
  EXPECT_EQ(got_by_key, sent_by_key);
}

}  // namespace
}  // namespace pgoutbox::test
