#include "batch_publisher.h"

#include <stdexcept>
#include <utility>

namespace shop {

namespace {

// The delivery report's opaque points at the message's flag in the batch's result.
extern "C" void on_delivery(rd_kafka_t*, const rd_kafka_message_t* message, void*) {
  *static_cast<int*>(message->_private) = message->err == RD_KAFKA_RESP_ERR_NO_ERROR ? 1 : 0;
}

void set(rd_kafka_conf_t* conf, const std::string& name, const std::string& value) {
  char error[512];
  if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), error, sizeof error) != RD_KAFKA_CONF_OK) {
    rd_kafka_conf_destroy(conf);
    throw std::runtime_error("kafka property " + name + ": " + error);
  }
}

}  // namespace

BatchPublisher::BatchPublisher(const std::string& brokers, std::string topic_prefix,
                               std::chrono::milliseconds delivery_timeout,
                               const std::map<std::string, std::string>& properties)
    : topic_prefix_(std::move(topic_prefix)) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  set(conf, "bootstrap.servers", brokers);
  set(conf, "enable.idempotence", "true");
  set(conf, "acks", "all");
  set(conf, "message.timeout.ms", std::to_string(delivery_timeout.count()));
  for (const auto& [name, value] : properties) set(conf, name, value);
  rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
  char error[512];
  rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);
  if (rk_ == nullptr) {
    rd_kafka_conf_destroy(conf);
    throw std::runtime_error(std::string("kafka producer: ") + error);
  }
}

BatchPublisher::~BatchPublisher() {
  rd_kafka_flush(rk_, 5000);
  rd_kafka_destroy(rk_);
}

std::vector<bool> BatchPublisher::publish(const std::vector<OutboxMessage>& batch) {
  // -1: no report yet; 0: failed; 1: acknowledged.
  std::vector<int> outcome(batch.size(), -1);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const auto& m = batch[i];
    const std::string topic = topic_prefix_ + m.aggregate_type;
    const auto error = rd_kafka_producev(
        rk_, RD_KAFKA_V_TOPIC(topic.c_str()),
        RD_KAFKA_V_KEY(const_cast<char*>(m.aggregate_id.data()), m.aggregate_id.size()),
        RD_KAFKA_V_VALUE(const_cast<char*>(m.payload.data()), m.payload.size()),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADER("id", m.id.c_str(), -1),
        RD_KAFKA_V_HEADER("type", m.type.c_str(), -1),
        // The example's one addition to pgoutbox's record: it lets reconcile --cutover say
        // which relay published each copy. Consumers ignore it.
        RD_KAFKA_V_HEADER("relay", "outbox-poller", -1), RD_KAFKA_V_OPAQUE(&outcome[i]), RD_KAFKA_V_END);
    if (error != RD_KAFKA_RESP_ERR_NO_ERROR) outcome[i] = 0;  // queue full or unknown topic: retried next poll
  }
  // Every enqueued message gets its report within message.timeout.ms (success or timeout).
  rd_kafka_flush(rk_, -1);
  std::vector<bool> delivered(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) delivered[i] = outcome[i] == 1;
  return delivered;
}

}  // namespace shop
