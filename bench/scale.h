#pragma once

// The scale curves: pgoutbox (at-least-once, default configuration) draining a backlog as one
// dimension of the workload grows and the others stay put — payload size, events per
// transaction, distinct keys — and its peak RSS as the backlog grows (it must stay flat).

#include <cstdint>
#include <string>
#include <vector>

#include "backlog.h"
#include "contenders.h"

namespace pgoutbox::bench {

struct ScalePoint {
  std::string curve;   // "payload", "transaction", "keys", "backlog"
  std::int64_t x = 0;  // the value that grows along the curve
  BacklogSpec backlog;
};

struct ScaleRow {
  std::string curve;
  std::int64_t x = 0;
  std::int64_t events = 0;
  DrainResult result;
  double events_per_second() const { return static_cast<double>(events) / result.seconds; }
  double events_per_second_after_start() const { return rate_after_first(result, events); }
};

// The full run's points, or a handful of tiny ones for the smoke run.
std::vector<ScalePoint> scale_points(bool smoke);

// Drains the point's backlog with pgoutbox from a slot made before it was written.
ScaleRow measure_scale_point(const Bench& bench, const ScalePoint& point);

}  // namespace pgoutbox::bench
