#pragma once

// The part of librdkafka's statistics JSON (emitted every statistics.interval.ms)
// that pgoutbox turns into gauges: the producer queue, and per broker its state and round-trip
// time. Parsed with simdjson.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pgoutbox::metrics {

struct BrokerStatistics {
  std::string name;  // "host:port/nodeid", or "host:port/bootstrap" before metadata is known
  std::int64_t node_id = -1;
  std::string state;  // INIT, DOWN, CONNECT, AUTH, APIVERSION_QUERY, AUTH_HANDSHAKE, UP, UPDATE
  double rtt_avg_seconds = 0;
  double rtt_p99_seconds = 0;
};

struct KafkaStatistics {
  std::uint64_t queue_messages = 0;       // msg_cnt: records in the producer's queues, not yet acknowledged
  std::uint64_t queue_bytes = 0;          // msg_size
  std::vector<BrokerStatistics> brokers;  // real brokers only: internal and logical ones are left out

  // At least one broker is connected and usable.
  bool any_broker_up() const;
};

// nullopt when `json` is not a statistics object (malformed, or missing msg_cnt/msg_size).
std::optional<KafkaStatistics> parse_kafka_statistics(std::string_view json);

}  // namespace pgoutbox::metrics
