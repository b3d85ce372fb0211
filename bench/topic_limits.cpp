#include "topic_limits.h"

#include <algorithm>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "backlog.h"
#include "workload.h"

namespace pgoutbox::bench {
namespace {

struct Case {
  Contender mode;
  int max_message_bytes;  // 0: the broker's default
  std::string tag;        // slot and topic names
};

BacklogSpec backlog_of(std::int64_t events, double oversized_share, int oversized_bytes) {
  BacklogSpec b;
  b.events_per_txn = 10;
  b.payload_bytes = 200;
  b.events = events;
  b.oversized_share = oversized_share;
  b.oversized_bytes = oversized_bytes;
  return b;
}

// Writes the backlog after a slot for each case, drains it with each, in order, and drops the slots.
std::vector<TopicLimitsRow> drain_cases(const Bench& bench, const std::vector<Case>& cases,
                                        const BacklogSpec& backlog) {
  bench.pg.exec("TRUNCATE orders, outbox");
  for (const auto& c : cases) {
    bench.pg.exec(fmt::format("SELECT pg_create_logical_replication_slot('{}', 'pgoutput')", c.tag));
  }
  write_backlog(bench, backlog);
  const Lsn end = end_of_backlog(bench);
  const auto share = backlog.oversized_share;
  const auto per_txn = backlog.events_per_txn;
  std::vector<TopicLimitsRow> rows;
  for (const auto& c : cases) {
    DrainTarget target;
    if (c.max_message_bytes > 0) target.topic_config["max.message.bytes"] = std::to_string(c.max_message_bytes);
    target.dead_letter_topic = "bench." + c.tag + ".dead-letter";
    if (share > 0) target.dead_letter = [=](std::int64_t seq) { return oversized_event(seq, per_txn, share); };
    TopicLimitsRow row;
    row.contender = c.mode;
    row.max_message_bytes = c.max_message_bytes;
    row.oversized_share = share;
    row.events = backlog.events;
    row.result = drain(bench, c.mode, c.tag, end, "bench." + c.tag, backlog.events, target);
    row.oversized = row.result.dead_letters.expected;
    progress(fmt::format("  {}, limit {}, {} oversized: {:.2f} s, {:.0f} events/s, {:.2f} µs CPU/event, {} session(s)",
                         name_of(c.mode), c.max_message_bytes > 0 ? std::to_string(c.max_message_bytes) : "default",
                         row.oversized, row.result.seconds, row.events_per_second(), row.cpu_us_per_event(),
                         row.result.sessions ? fmt::format("{:.0f}", *row.result.sessions) : "?"));
    rows.push_back(std::move(row));
  }
  for (const auto& c : cases) bench.pg.drop_slot_when_free(c.tag);
  return rows;
}

}  // namespace

std::vector<TopicLimitsRow> measure_topic_limits(const Bench& bench, const TopicLimitsSpec& spec) {
  if (spec.warmup_events > 0) {
    progress(fmt::format("topic limits: warm-up ({} events, untimed)", spec.warmup_events));
    std::vector<Case> warmup;
    for (const auto mode : spec.modes) warmup.push_back({mode, 0, fmt::format("tl_warmup_{}", tag_of(mode))});
    drain_cases(bench, warmup, backlog_of(spec.warmup_events, 0, spec.oversized_bytes));
  }
  // The reference and the limited topic drain one backlog without oversized rows; the limited
  // topic drains one with them.
  std::vector<Case> plain, oversized;
  for (const auto mode : spec.modes) {
    plain.push_back({mode, 0, fmt::format("tl_default_{}", tag_of(mode))});
    plain.push_back({mode, spec.max_message_bytes, fmt::format("tl_limit_{}", tag_of(mode))});
    oversized.push_back({mode, spec.max_message_bytes, fmt::format("tl_oversized_{}", tag_of(mode))});
  }
  std::vector<std::pair<std::vector<Case>, double>> backlogs = {{plain, 0}, {oversized, spec.oversized_share}};
  if (spec.reverse) {
    std::reverse(backlogs.begin(), backlogs.end());
    for (auto& [cases, share] : backlogs) std::reverse(cases.begin(), cases.end());
  }
  std::vector<TopicLimitsRow> rows;
  for (const auto& [cases, share] : backlogs) {
    progress(share > 0 ? fmt::format("topic limits: {} events, {:g}% of the transactions with one {} B row",
                                     spec.events, 100 * share, spec.oversized_bytes)
                       : fmt::format("topic limits: {} events, no oversized row", spec.events));
    for (auto& row : drain_cases(bench, cases, backlog_of(spec.events, share, spec.oversized_bytes))) {
      row.ran = static_cast<int>(rows.size()) + 1;
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

}  // namespace pgoutbox::bench
