#include "side_producer.h"

#include <stdexcept>

#include "stop_signal.h"

namespace shop {

namespace {

struct Delivery {
  bool done = false;
  rd_kafka_resp_err_t error = RD_KAFKA_RESP_ERR_NO_ERROR;
};

extern "C" void on_delivery(rd_kafka_t*, const rd_kafka_message_t* message, void*) {
  auto* delivery = static_cast<Delivery*>(message->_private);
  delivery->error = message->err;
  delivery->done = true;
}

void set(rd_kafka_conf_t* conf, const char* name, const std::string& value) {
  char error[512];
  if (rd_kafka_conf_set(conf, name, value.c_str(), error, sizeof error) != RD_KAFKA_CONF_OK) {
    rd_kafka_conf_destroy(conf);
    throw std::runtime_error(std::string("kafka property ") + name + ": " + error);
  }
}

}  // namespace

SideProducer::SideProducer(const std::string& brokers) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  set(conf, "bootstrap.servers", brokers);
  set(conf, "enable.idempotence", "true");
  set(conf, "acks", "all");
  set(conf, "message.timeout.ms", "0");  // retry a broker outage until it ends (or we stop)
  rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
  char error[512];
  rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);
  if (rk_ == nullptr) {
    rd_kafka_conf_destroy(conf);
    throw std::runtime_error(std::string("kafka producer: ") + error);
  }
}

SideProducer::~SideProducer() { rd_kafka_destroy(rk_); }

bool SideProducer::send(const std::string& topic, std::optional<std::string_view> key,
                        std::optional<std::string_view> value, const KafkaHeaders& headers) {
  rd_kafka_headers_t* hdrs = rd_kafka_headers_new(headers.size());
  for (const auto& [name, text] : headers) {
    rd_kafka_header_add(hdrs, name.data(), static_cast<ssize_t>(name.size()), text.data(),
                        static_cast<ssize_t>(text.size()));
  }
  Delivery delivery;
  // Absent key or value: a null pointer (a null key, a tombstone), not an empty string.
  void* key_data = key ? const_cast<char*>(key->data()) : nullptr;
  const std::size_t key_size = key ? key->size() : 0;
  void* value_data = value ? const_cast<char*>(value->data()) : nullptr;
  const std::size_t value_size = value ? value->size() : 0;
  const auto error =
      rd_kafka_producev(rk_, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_KEY(key_data, key_size),
                        RD_KAFKA_V_VALUE(value_data, value_size), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                        RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_OPAQUE(&delivery), RD_KAFKA_V_END);
  if (error != RD_KAFKA_RESP_ERR_NO_ERROR) {
    rd_kafka_headers_destroy(hdrs);
    throw std::runtime_error("produce to " + topic + ": " + rd_kafka_err2str(error));
  }
  while (!delivery.done) {
    rd_kafka_poll(rk_, 100);
    if (!delivery.done && stop_requested()) {
      // Withdraw it; its delivery report (purged) still arrives, through this loop.
      rd_kafka_purge(rk_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
      while (!delivery.done) rd_kafka_poll(rk_, 100);
      return false;
    }
  }
  if (delivery.error != RD_KAFKA_RESP_ERR_NO_ERROR) {
    throw std::runtime_error("produce to " + topic + ": " + rd_kafka_err2str(delivery.error));
  }
  return true;
}

}  // namespace shop
