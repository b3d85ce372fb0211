#include "pgoutbox/metrics/summary.h"

#include <fmt/format.h>

namespace pgoutbox::metrics {

Summary::Summary(const RelayProbe& relay, const SlotProbe& slot)
    : relay_(relay),
      slot_(slot),
      last_time_(std::chrono::steady_clock::now()),
      last_published_(relay.published_total()),
      last_received_(relay.received_total()) {}

std::string Summary::next_line(std::chrono::steady_clock::time_point now) {
  const double seconds = std::chrono::duration<double>(now - last_time_).count();
  const auto published = relay_.published_total();
  const auto received = relay_.received_total();
  const auto rate = [seconds](std::uint64_t count) { return seconds > 0 ? static_cast<double>(count) / seconds : 0.0; };
  const auto lag = slot_.lag_bytes();
  std::string line = fmt::format(
      "summary: {:.1f} events/s published, {:.1f} events/s received, in flight {} events ({} bytes), "
      "replication lag {}, confirmed {}, {}",
      rate(published - last_published_), rate(received - last_received_), relay_.in_flight_records(),
      relay_.in_flight_bytes(), lag ? fmt::format("{} bytes", *lag) : std::string("unknown"),
      relay_.confirmed().to_string(), relay_.streaming() ? "streaming" : "not streaming");
  last_time_ = now;
  last_published_ = published;
  last_received_ = received;
  return line;
}

}  // namespace pgoutbox::metrics
