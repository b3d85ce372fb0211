// librdkafka's statistics JSON (its documentation of the statistics callback): top-level msg_cnt and msg_size are the
// producer queue (records and bytes handed to librdkafka and not yet delivered); brokers.<name>.rtt holds
// round-trip-time percentiles in microseconds over the last interval (0 when there were no requests). Brokers whose
// source is "internal" (the queue broker) or "logical" (coordinator stand-ins) are not connections to Kafka and are
// left out.
#include "pgoutbox/metrics/kafka_statistics.h"

#include <simdjson.h>

#include <algorithm>

namespace pgoutbox::metrics {
namespace {

double micros_to_seconds(simdjson::dom::element rtt, std::string_view name) {
  std::int64_t micros = 0;
  if (rtt[name].get(micros) != simdjson::SUCCESS) return 0;
  return static_cast<double>(micros) / 1e6;
}

}  // namespace

bool KafkaStatistics::any_broker_up() const {
  return std::any_of(brokers.begin(), brokers.end(), [](const BrokerStatistics& b) { return b.state == "UP"; });
}

std::optional<KafkaStatistics> parse_kafka_statistics(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(simdjson::padded_string(json)).get(root) != simdjson::SUCCESS) return std::nullopt;
  KafkaStatistics stats;
  std::uint64_t count = 0;
  std::uint64_t size = 0;
  if (root["msg_cnt"].get(count) != simdjson::SUCCESS || root["msg_size"].get(size) != simdjson::SUCCESS) {
    return std::nullopt;
  }
  stats.queue_messages = count;
  stats.queue_bytes = size;
  simdjson::dom::object brokers;
  if (root["brokers"].get(brokers) != simdjson::SUCCESS) return stats;
  for (auto [name, broker] : brokers) {
    std::string_view source;
    if (broker["source"].get(source) == simdjson::SUCCESS && (source == "internal" || source == "logical")) continue;
    BrokerStatistics b;
    b.name = std::string(name);
    std::int64_t node_id = -1;
    if (broker["nodeid"].get(node_id) == simdjson::SUCCESS) b.node_id = node_id;
    std::string_view state;
    if (broker["state"].get(state) == simdjson::SUCCESS) b.state = std::string(state);
    simdjson::dom::element rtt;
    if (broker["rtt"].get(rtt) == simdjson::SUCCESS) {
      b.rtt_avg_seconds = micros_to_seconds(rtt, "avg");
      b.rtt_p99_seconds = micros_to_seconds(rtt, "p99");
    }
    stats.brokers.push_back(std::move(b));
  }
  return stats;
}

}  // namespace pgoutbox::metrics
