#pragma once

#include <librdkafka/rdkafka.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shop {

using KafkaHeaders = std::vector<std::pair<std::string, std::string>>;

// The consumer's own producer, for the records it sends aside: poison to the dead-letter topic,
// compensating events for business rejections. Idempotent, acks=all; each send waits for the
// broker's ack, because the consumer's offset may only move once the record is safely there.
class SideProducer {
 public:
  explicit SideProducer(const std::string& brokers);
  ~SideProducer();
  SideProducer(const SideProducer&) = delete;
  SideProducer& operator=(const SideProducer&) = delete;

  // True once Kafka acknowledged the record; false when a stop was requested first (the record
  // is withdrawn). Retriable errors (broker down) are retried until one of the two happens;
  // throws std::runtime_error on a permanent error (e.g. not authorised for the topic).
  bool send(const std::string& topic, std::optional<std::string_view> key, std::optional<std::string_view> value,
            const KafkaHeaders& headers);

 private:
  rd_kafka_t* rk_ = nullptr;
};

}  // namespace shop
