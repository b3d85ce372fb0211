#pragma once

// A latency run as a timeline (bench/results/timeline-*.png): the events grouped into windows by
// their commit time, each window's median and worst latency. A periodic stall (a timer, a status
// update, a checkpoint write, a broker's GC) shows as a pattern of spikes, which the percentiles
// of the whole run do not show.

#include <cstdint>
#include <vector>

namespace pgoutbox::bench {

struct TimelinePoint {
  double t_s = 0;  // the window's start, from the run's first commit
  double p50_ms = 0;
  double max_ms = 0;
};

inline constexpr std::int64_t kTimelineWindowUs = 100'000;

// `commit_us[i]` and `latency_ms[i]` describe event i; windows without events are left out.
std::vector<TimelinePoint> timeline_of(const std::vector<std::int64_t>& commit_us,
                                       const std::vector<double>& latency_ms);

}  // namespace pgoutbox::bench
