#pragma once

// Where pgoutbox's latency goes, read from its own /metrics: the pgoutbox_stage_seconds
// histograms (docs/operating.md "Stage latency") scraped at the start and at the end of a timed window,
// so the figures cover that window alone. A percentile is interpolated inside its bucket (as
// Prometheus's histogram_quantile does), so it is as fine as the buckets: 100 µs, 250 µs,
// 500 µs, 1 ms, 2.5 ms, 5 ms, 10 ms, 25 ms, 50 ms, 100 ms, …

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pgoutbox::bench {

// The stages in their order: commit → walsender → receive → send → ack → confirm.
inline constexpr std::array<const char*, 5> kStages = {"walsender", "receive", "send", "ack", "confirm"};

struct StagePercentiles {
  double p50_ms = 0;
  double p99_ms = 0;
};

// By stage name; empty when the binary has no stage histograms (a baseline from before them).
using StageFigures = std::map<std::string, StagePercentiles>;

// The value of the unlabelled sample `name` in pgoutbox's /metrics on 127.0.0.1:`port` (a
// counter or a gauge); nullopt when the endpoint does not answer or has no such sample.
std::optional<double> metric_value(int port, const std::string& name);

class StageProbe {
 public:
  // pgoutbox's metrics endpoint on 127.0.0.1:`port`.
  explicit StageProbe(int port) : port_(port) {}
  void begin() { before_ = scrape(); }
  StageFigures end() const;

 private:
  // Cumulative bucket counts by stage, in the order of their upper bounds.
  using Buckets = std::map<std::string, std::vector<std::pair<double, double>>>;
  Buckets scrape() const;

  int port_;
  Buckets before_;
};

}  // namespace pgoutbox::bench
