#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace shop {

// One local_message row, as the poller publishes it: the same topic, key, value and headers as
// pgoutbox's default mapping gives the same row, so consumers see no difference at the cutover.
struct OutboxMessage {
  std::string id;
  std::string aggregate_type;
  std::string aggregate_id;
  std::string type;
  std::string payload;
};

// An idempotent librdkafka producer (acks=all, enable.idempotence) that publishes a batch and
// waits for every delivery report: the caller marks a row SENT only when Kafka holds it.
class BatchPublisher {
 public:
  // Topics are `topic_prefix` + aggregatetype, as pgoutbox's template outbox.event.${aggregatetype}.
  // `properties` are extra librdkafka settings; throws std::runtime_error on a bad one.
  BatchPublisher(const std::string& brokers, std::string topic_prefix, std::chrono::milliseconds delivery_timeout,
                 const std::map<std::string, std::string>& properties);
  ~BatchPublisher();
  BatchPublisher(const BatchPublisher&) = delete;
  BatchPublisher& operator=(const BatchPublisher&) = delete;

  // One flag per message, in order: true when Kafka acknowledged it. A message not acknowledged
  // within the delivery timeout is false; it may still be in the topic (the ack was lost), which
  // is why a poller is at-least-once.
  std::vector<bool> publish(const std::vector<OutboxMessage>& batch);

 private:
  std::string topic_prefix_;
  rd_kafka_t* rk_ = nullptr;
};

}  // namespace shop
