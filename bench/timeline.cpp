#include "timeline.h"

#include <algorithm>
#include <map>

namespace pgoutbox::bench {

std::vector<TimelinePoint> timeline_of(const std::vector<std::int64_t>& commit_us,
                                       const std::vector<double>& latency_ms) {
  std::vector<TimelinePoint> points;
  if (commit_us.empty() || commit_us.size() != latency_ms.size()) return points;
  const auto first = *std::min_element(commit_us.begin(), commit_us.end());
  std::map<std::int64_t, std::vector<double>> windows;
  for (std::size_t i = 0; i < commit_us.size(); ++i) {
    windows[(commit_us[i] - first) / kTimelineWindowUs].push_back(latency_ms[i]);
  }
  for (auto& [window, latencies] : windows) {
    std::sort(latencies.begin(), latencies.end());
    points.push_back(
        {static_cast<double>(window * kTimelineWindowUs) / 1e6, latencies[latencies.size() / 2], latencies.back()});
  }
  return points;
}

}  // namespace pgoutbox::bench
