#pragma once

// The librdkafka properties pgoutbox's delivery guarantees rest on (docs/spec.md I1, I4): one
// list, read by the configuration loader (to point at the offending line) and by the producer
// (which refuses them too, for a Config built in code).

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace pgoutbox::config {

struct FixedKafkaProperty {
  std::string_view name;
  std::string_view value;  // what the producer sets
  std::string_view shown;  // how the rule is said: "all (or -1)"
  std::string_view why;
};

std::span<const FixedKafkaProperty> fixed_kafka_properties();

// nullopt when `value` keeps the rule of the fixed property `name` (or `name` is not fixed);
// else "must stay …: why".
std::optional<std::string> refuse_kafka_property(std::string_view name, std::string_view value);

}  // namespace pgoutbox::config
