#include "pgoutbox/metrics/endpoints.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/text_serializer.h>

#include <chrono>
#include <memory>
#include <mutex>

#include "pgoutbox/outbox/header_guard.h"

namespace pgoutbox::metrics {

Readiness readiness(const RelayProbe& relay) {
  if (!relay.streaming()) return {false, "not streaming: no replication session (connecting, or waiting to reconnect)"};
  switch (relay.kafka_state()) {
    case KafkaState::up:
      return {true, "ready"};
    case KafkaState::down:
      return {false, "kafka unreachable: no broker connection is up"};
    case KafkaState::unknown:
      break;
  }
  return {false, "kafka not confirmed reachable yet: waiting for the producer's first broker connection"};
}

Routes endpoints(prometheus::Registry& registry, const RelayProbe& relay) {
  Routes routes;
  // Reserved headers the headers column tried to set (outbox/header_guard.h), brought up to date
  // at each scrape; labelled by configured table only.
  auto& dropped =
      prometheus::BuildCounter()
          .Name("pgoutbox_headers_dropped_total")
          .Help(
              "Headers a row's headers column tried to set under a reserved name (id, type, pgoutbox.*, or a "
              "name with a NUL byte); dropped, never published.")
          .Register(registry);
  auto sync_mutex = std::make_shared<std::mutex>();
  routes["/metrics"] = [&registry, &dropped, sync_mutex] {
    {
      std::lock_guard lock(*sync_mutex);
      for (const auto& [table, count] : outbox::dropped_header_counts()) {
        auto& counter = dropped.Add({{"table", table}});
        if (const double value = static_cast<double>(count); value > counter.Value())
          counter.Increment(value - counter.Value());
      }
    }
    // Exposition format 0.0.4, what prometheus-cpp's TextSerializer writes.
    return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8",
                        prometheus::TextSerializer().Serialize(registry.Collect())};
  };
  routes["/healthz"] = [] { return HttpResponse{200, "text/plain; charset=utf-8", "ok\n"}; };
  routes["/readyz"] = [&relay] {
    const auto state = readiness(relay);
    return HttpResponse{state.ready ? 200U : 503U, "text/plain; charset=utf-8", state.reason + "\n"};
  };
  return routes;
}

void register_process_info(prometheus::Registry& registry, const std::string& version) {
  prometheus::BuildGauge()
      .Name("pgoutbox_build_info")
      .Help("Always 1; the version label names the running pgoutbox.")
      .Register(registry)
      .Add({{"version", version}})
      .Set(1);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  prometheus::BuildGauge()
      .Name("pgoutbox_start_time_seconds")
      .Help("When the process started, in seconds since the Unix epoch.")
      .Register(registry)
      .Add({})
      .Set(std::chrono::duration<double>(now).count());
}

}  // namespace pgoutbox::metrics
