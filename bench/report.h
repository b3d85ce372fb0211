#pragma once

// The comparison's results as Markdown (printed, and written between markers into
// bench/RESULTS.md so the hand-written analysis around them survives a rerun) and as JSON for
// the chart (bench/chart.py).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "results_file.h"

#include "contenders.h"
#include "scale.h"
#include "stage_probe.h"
#include "timeline.h"
#include "topic_limits.h"

namespace pgoutbox::bench {

struct ThroughputRow {
  std::string scenario;  // "10 × 200 B"
  int events_per_txn = 0;
  int payload_bytes = 0;
  std::int64_t events = 0;
  double workload_wal_per_event = 0;            // WAL the writes themselves produced, no relay running
  double workload_backend_cpu_s_per_event = 0;  // CPU of the writers' backends
  Contender contender = Contender::pgoutbox;
  DrainResult result;
  std::string build;  // empty: this build; else the baseline's label (Bench::build)
  double events_per_second() const { return static_cast<double>(events) / result.seconds; }
  double events_per_second_after_start() const { return rate_after_first(result, events); }
};

struct LatencyRow {
  double offered_eps = 0;
  double achieved_eps = 0;
  Contender contender = Contender::pgoutbox;
  std::string build;  // as in ThroughputRow
  std::int64_t events = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;  // commit → visible to a read_committed consumer
  std::optional<double> p99_ack_ms;           // commit → LogAppendTime (not for transactional records)
  Delivery delivery;
  DbCost db;
  ProcessCost process;
  double seconds = 0;  // the relay's run, for its CPU share
  // From the workload's last commit to the last event visible: how far behind the load the
  // relay was when it stopped (a relay that keeps up is a few milliseconds behind).
  double behind_at_end_s = 0;
  // pgoutbox's own stage figures over the timed window (empty for the others), and the run's
  // commit → visible latency over time.
  StageFigures stages;
  std::vector<TimelinePoint> timeline;
  std::int64_t oversized = 0;      // rows over the topic's limit, dead-lettered, left out of the figures
  std::optional<double> sessions;  // pgoutbox_sessions_started_total at the end (pgoutbox only)
};

struct Report {
  std::string command;
  std::string machine;
  std::string started_utc;
  double total_seconds = 0;
  std::string load_at_start, load_at_end;  // /proc/loadavg's 1, 5 and 15 minute averages
  PollingTuning polling;
  int busy = 0;  // spinning processes beside the latency runs (--busy)
  std::vector<ThroughputRow> throughput;
  std::vector<LatencyRow> latency;
  std::vector<ScaleRow> scale;
  // --topic-limits: that run's cases alone, and what they were run with.
  std::vector<TopicLimitsRow> topic_limits;
  TopicLimitsSpec topic_limits_spec;
  // --topic-limits: the latency runs beside a steady load, with and without oversized rows.
  std::vector<LatencyRow> topic_limits_latency;
};

std::string to_markdown(const Report& report);
std::string to_json(const Report& report);
// The command, when it ran, the machine and its load.
std::string run_header(const Report& report);

// A --topic-limits run: its table and issue 36's target.
std::string to_topic_limits_markdown(const Report& report);
// The README's headline: the 10 × 200 B backlog for every contender, with its p99 at 1,000 events/s.
std::string to_headline_markdown(const Report& report);
// Replaces the text between "<!-- bench:begin -->" and "<!-- bench:end -->" in `path` (or
// creates the file with only the markers and the text).
void write_between_markers(const std::string& path, const std::string& text);

}  // namespace pgoutbox::bench
