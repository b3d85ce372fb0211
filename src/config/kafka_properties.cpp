#include "pgoutbox/config/kafka_properties.h"

#include <array>

#include <fmt/format.h>

namespace pgoutbox::config {
namespace {

constexpr std::string_view kIdempotence = "pgoutbox's ordering and no-duplicate guarantees need it";
constexpr std::string_view kAcks = "a record counts as delivered only when all in-sync replicas have it";
constexpr std::string_view kTimeout = "a record must never be given up while Kafka is away";

constexpr std::array kFixed{
    FixedKafkaProperty{"enable.idempotence", "true", "true", kIdempotence},
    FixedKafkaProperty{"acks", "all", "all (or -1)", kAcks},
    FixedKafkaProperty{"request.required.acks", "all", "all (or -1)", kAcks},    // librdkafka's alias of acks
    FixedKafkaProperty{"message.timeout.ms", "0", "0 (no timeout)", kTimeout},   // unbounded (I1)
    FixedKafkaProperty{"delivery.timeout.ms", "0", "0 (no timeout)", kTimeout},  // alias of message.timeout.ms
};

}  // namespace

std::span<const FixedKafkaProperty> fixed_kafka_properties() { return kFixed; }

std::optional<std::string> refuse_kafka_property(std::string_view name, std::string_view value) {
  for (const auto& fixed : kFixed) {
    if (fixed.name != name) continue;
    const bool acks = name == "acks" || name == "request.required.acks";
    if (value == fixed.value || (acks && value == "-1")) return std::nullopt;
    return fmt::format("must stay {}: {}", fixed.shown, fixed.why);
  }
  return std::nullopt;
}

}  // namespace pgoutbox::config
