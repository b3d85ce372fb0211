#pragma once

// The real Kafka sink: kafka::Producer behind the Sink interface.

#include <cstdint>
#include <map>
#include <string>

#include "pgoutbox/kafka/sink.h"

namespace pgoutbox::kafka {

struct SinkSettings {
  std::string brokers;
  std::map<std::string, std::string> properties;  // user's librdkafka properties
  std::uint64_t max_in_flight_records = 20'000;
  std::uint64_t max_in_flight_bytes = 16ULL << 20;
  std::size_t batch_limit = 0;  // ProducerSettings::batch_limit
};

SinkFactory producer_sink_factory(SinkSettings settings);

}  // namespace pgoutbox::kafka
