#pragma once

// What pgoutbox's HTTP endpoints answer:
//   /metrics  Prometheus text exposition of the registry.
//   /healthz  200 while the process runs and serves HTTP (liveness).
//   /readyz   200 while a replication session is streaming and Kafka is reachable; otherwise
//             503 with a one-line reason (readiness).

#include <prometheus/registry.h>

#include <string>

#include "pgoutbox/metrics/http_server.h"
#include "pgoutbox/metrics/relay_probe.h"

namespace pgoutbox::metrics {

struct Readiness {
  bool ready = false;
  std::string reason;  // why not, or "ready"
};

Readiness readiness(const RelayProbe& relay);

Routes endpoints(prometheus::Registry& registry, const RelayProbe& relay);

// pgoutbox_build_info{version} 1 and pgoutbox_start_time_seconds.
void register_process_info(prometheus::Registry& registry, const std::string& version);

}  // namespace pgoutbox::metrics
