#include "report.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace pgoutbox::bench {
namespace {

constexpr const char* kBegin = "<!-- bench:begin -->";
constexpr const char* kEnd = "<!-- bench:end -->";

// This build's row (not the baseline's).
const ThroughputRow* find_row(const Report& r, const std::string& scenario, Contender c) {
  for (const auto& row : r.throughput) {
    if (row.scenario == scenario && row.contender == c && row.build.empty()) return &row;
  }
  return nullptr;
}

double per_event(double value, std::int64_t events) { return events > 0 ? value / static_cast<double>(events) : 0; }

std::string mib(long kib) { return kib > 0 ? fmt::format("{:.1f}", static_cast<double>(kib) / 1024.0) : "—"; }

std::string throughput_table(const Report& r) {
  std::string out =
      "| events/txn × payload | events | contender | events/s | of ceiling | first record s | events/s after it | "
      "duplicates | DB backend CPU µs/event | statements/event (on outbox) | workload WAL B/event | workload backend "
      "CPU µs/event | extra WAL B/event | dead tuples/event | client CPU µs/event | broker CPU µs/event | relay peak "
      "RSS MiB |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& row : r.throughput) {
    const auto* ceiling = find_row(r, row.scenario, Contender::recvlogical);
    const bool relay = row.contender != Contender::recvlogical;
    const auto& db = row.result.db;
    out += fmt::format(
        "| {} | {} | {} | {:.0f} | {} | {} | {} | {} | {:.1f} | {} | {:.0f} | {:.1f} | {:.1f} | {:.2f} | {} | {} | {} "
        "|\n",
        row.scenario, row.events, label_of(row.contender, row.build), row.events_per_second(),
        ceiling ? fmt::format("{:.0f}%", 100.0 * row.events_per_second() / ceiling->events_per_second()) : "—",
        relay ? fmt::format("{:.2f}", row.result.first_seconds) : "—",
        relay && row.events_per_second_after_start() > 0 ? fmt::format("{:.0f}", row.events_per_second_after_start())
                                                         : "—",
        relay ? std::to_string(row.result.delivery.duplicates) : "—", 1e6 * per_event(db.backend_cpu_s, row.events),
        fmt::format("{:.3f} ({:.3f})", per_event(static_cast<double>(db.statements), row.events),
                    per_event(static_cast<double>(db.outbox_statements), row.events)),
        row.workload_wal_per_event, 1e6 * row.workload_backend_cpu_s_per_event,
        per_event(static_cast<double>(db.wal_bytes), row.events),
        per_event(static_cast<double>(db.dead_tuples), row.events),
        fmt::format("{:.1f}", 1e6 * per_event(row.result.process.cpu_s, row.events)),
        relay ? fmt::format("{:.1f}", 1e6 * per_event(row.result.broker_cpu_s, row.events)) : "—",
        relay ? mib(row.result.process.peak_rss_kib) : "—");
  }
  return out;
}

std::string latency_table(const Report& r) {
  std::string out =
      "| offered events/s | achieved | contender | events | behind at end s | duplicates | p50 ms | p99 ms | max ms | "
      "p99 to ack ms | statements/event (on outbox) | DB backend CPU µs/event | relay CPU % of a core | relay peak RSS "
      "MiB |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& row : r.latency) {
    out += fmt::format(
        "| {:.0f} | {:.0f} | {} | {} | {:.2f} | {} | {:.1f} | {:.1f} | {:.1f} | {} | {:.3f} ({:.3f}) | {:.1f} | {:.1f} "
        "| "
        "{} |\n",
        row.offered_eps, row.achieved_eps, label_of(row.contender, row.build), row.events, row.behind_at_end_s,
        row.delivery.duplicates, row.p50_ms, row.p99_ms, row.max_ms,
        row.p99_ack_ms ? fmt::format("{:.1f}", *row.p99_ack_ms) : "—",
        per_event(static_cast<double>(row.db.statements), row.events),
        per_event(static_cast<double>(row.db.outbox_statements), row.events),
        1e6 * per_event(row.db.backend_cpu_s, row.events),
        row.seconds > 0 ? 100.0 * row.process.cpu_s / row.seconds : 0, mib(row.process.peak_rss_kib));
  }
  return out;
}

// pgoutbox's stages (stage_probe.h) in each of its latency runs.
std::string stage_table(const Report& r) {
  std::string out;
  for (const auto& row : r.latency) {
    if (row.stages.empty()) continue;
    if (out.empty()) {
      out =
          "| offered events/s | contender | commit → walsender wrote p50 / p99 ms | → received | → handed to "
          "librdkafka | → acknowledged | → confirmable | relay CPU µs/event |\n|---|---|---|---|---|---|---|---|\n";
    }
    out += fmt::format("| {:.0f} | {}", row.offered_eps, label_of(row.contender, row.build));
    for (const char* stage : kStages) {
      const auto it = row.stages.find(stage);
      out += it == row.stages.end() ? " | —" : fmt::format(" | {:.2f} / {:.2f}", it->second.p50_ms, it->second.p99_ms);
    }
    out += fmt::format(" | {:.1f} |\n", 1e6 * per_event(row.process.cpu_s, row.events));
  }
  return out;
}

// [[t_s, p50_ms, max_ms], ...]
std::string timeline_json(const std::vector<TimelinePoint>& points) {
  std::string out;
  for (const auto& p : points) {
    out += fmt::format("{}[{:.1f}, {:.2f}, {:.2f}]", out.empty() ? "" : ", ", p.t_s, p.p50_ms, p.max_ms);
  }
  return out;
}

std::string verdict(bool met) { return met ? "met" : "**missed**"; }

const LatencyRow* find_latency(const Report& r, double offered, Contender c) {
  for (const auto& row : r.latency) {
    if (row.offered_eps == offered && row.contender == c && row.build.empty()) return &row;
  }
  return nullptr;
}

// Issue 17's targets (against Debezium tuned and the ceiling), and the polling relay's from
// before: the floor to beat by far.
std::string targets(const Report& r) {
  std::string out = "| target | measured | |\n|---|---|---|\n";
  long peak_kib = 0;
  for (const auto& row : r.throughput) {
    if (row.contender != Contender::pgoutbox || !row.build.empty()) continue;
    peak_kib = std::max(peak_kib, row.result.process.peak_rss_kib);
    if (const auto* ceiling = find_row(r, row.scenario, Contender::recvlogical)) {
      const double share = 100.0 * row.events_per_second() / ceiling->events_per_second();
      const double want = row.payload_bytes <= 200 ? 100 : 90;
      out += fmt::format("| ≥ {:.0f}% of the ceiling, {} | {:.0f}% | {} |\n", want, row.scenario, share,
                         verdict(share >= want));
    }
    if (const auto* debezium = find_row(r, row.scenario, Contender::debezium_tuned)) {
      const double times = row.events_per_second_after_start() / debezium->events_per_second_after_start();
      out += fmt::format("| ≥ 5× Debezium tuned's events/s after start-up, {} | {:.1f}× | {} |\n", row.scenario, times,
                         verdict(times >= 5));
      const double rss = static_cast<double>(row.result.process.peak_rss_kib) /
                         static_cast<double>(std::max(1L, debezium->result.process.peak_rss_kib));
      const double cpu = row.result.process.cpu_s / std::max(1e-9, debezium->result.process.cpu_s);
      out += fmt::format("| ≤ 1/10 of Debezium tuned's peak RSS and CPU per event, {} | 1/{:.1f} and 1/{:.1f} | {} |\n",
                         row.scenario, 1 / rss, 1 / cpu, verdict(rss <= 0.1 && cpu <= 0.1));
    }
    if (const auto* polling = find_row(r, row.scenario, Contender::polling)) {
      const double times = row.events_per_second() / polling->events_per_second();
      out += fmt::format("| ≥ 5× the polling relay, {} | {:.1f}× | {} |\n", row.scenario, times, verdict(times >= 5));
    }
    const double wal = per_event(static_cast<double>(row.result.db.wal_bytes), row.events);
    out += fmt::format(
        "| no statements on the outbox, no extra WAL per event, {} | {} statements, {:.2f} B/event | {} |\n",
        row.scenario, row.result.db.outbox_statements, wal, verdict(row.result.db.outbox_statements == 0 && wal < 1.0));
  }
  // Issue 26's: the tail against Debezium tuned and the polling relay in the same run, and the
  // relay's CPU per event at 1,000 events/s.
  for (const auto& row : r.latency) {
    if (row.contender != Contender::pgoutbox || !row.build.empty() || !row.p99_ack_ms) continue;
    peak_kib = std::max(peak_kib, row.process.peak_rss_kib);
    const double most = row.offered_eps == 1000 ? 1.0 / 3 : 1.0 / 5;
    const auto* debezium = find_latency(r, row.offered_eps, Contender::debezium_tuned);
    if (debezium != nullptr && debezium->p99_ack_ms) {
      const double share = *row.p99_ack_ms / std::max(1e-9, *debezium->p99_ack_ms);
      out += fmt::format(
          "| p99 commit→ack ≤ 1/{:.0f} of Debezium tuned's at {:.0f} events/s | {:.1f} vs {:.1f} ms (1/{:.1f}) | {} "
          "|\n",
          1 / most, row.offered_eps, *row.p99_ack_ms, *debezium->p99_ack_ms, 1 / std::max(1e-9, share),
          verdict(share <= most + 1e-9));
    }
    const auto* polling = find_latency(r, row.offered_eps, Contender::polling);
    if (row.offered_eps == 1000 && polling != nullptr && polling->p99_ack_ms) {
      const double share = *row.p99_ack_ms / std::max(1e-9, *polling->p99_ack_ms);
      out += fmt::format(
          "| p99 commit→ack ≤ 1/2 of the polling relay's at 1000 events/s | {:.1f} vs {:.1f} ms (1/{:.1f}) | {} |\n",
          *row.p99_ack_ms, *polling->p99_ack_ms, 1 / std::max(1e-9, share), verdict(share <= 0.5));
    }
    if (row.offered_eps == 1000) {
      const double us = 1e6 * per_event(row.process.cpu_s, row.events);
      out += fmt::format("| relay CPU per event ≤ 60 µs at 1000 events/s | {:.1f} µs | {} |\n", us, verdict(us <= 60));
    }
  }
  long smallest_backlog_kib = 0, largest_backlog_kib = 0;
  std::int64_t smallest = 0, largest = 0;
  for (const auto& row : r.scale) {
    peak_kib = std::max(peak_kib, row.result.process.peak_rss_kib);
    if (row.curve != "backlog") continue;
    if (smallest == 0 || row.x < smallest) {
      smallest = row.x;
      smallest_backlog_kib = row.result.process.peak_rss_kib;
    }
    if (row.x > largest) {
      largest = row.x;
      largest_backlog_kib = row.result.process.peak_rss_kib;
    }
  }
  out += fmt::format("| peak RSS ≤ 64 MiB in every scenario | {} MiB | {} |\n", mib(peak_kib),
                     verdict(peak_kib <= 64 * 1024));
  if (largest > smallest) {
    // Flat: the largest backlog costs at most a quarter more than the smallest.
    const double growth =
        static_cast<double>(largest_backlog_kib) / static_cast<double>(std::max(1L, smallest_backlog_kib));
    out += fmt::format(
        "| peak RSS flat in backlog size (≤ 1.25× from {} to {} events) | {} → {} MiB ({:.2f}×) | {} |\n", smallest,
        largest, mib(smallest_backlog_kib), mib(largest_backlog_kib), growth, verdict(growth <= 1.25));
  }
  return out;
}

std::string scale_table(const Report& r) {
  std::string out =
      "| curve | value | events | events/s | first record s | relay CPU µs/event | broker CPU µs/event | relay peak "
      "RSS "
      "MiB | duplicates |\n"
      "|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& row : r.scale) {
    out += fmt::format("| {} | {} | {} | {:.0f} | {:.2f} | {:.1f} | {:.1f} | {} | {} |\n", row.curve, row.x, row.events,
                       row.events_per_second(), row.result.first_seconds,
                       1e6 * per_event(row.result.process.cpu_s, row.events),
                       1e6 * per_event(row.result.broker_cpu_s, row.events), mib(row.result.process.peak_rss_kib),
                       row.result.delivery.duplicates);
  }
  return out;
}

// Issue 14's targets for delivery: exactly-once beside at-least-once, and exactly once.
std::string exactly_once_targets(const Report& r) {
  std::string out = "| target | measured | |\n|---|---|---|\n";
  int runs = 0;
  std::int64_t events = 0, lost = 0, duplicates = 0;
  auto count = [&](const Delivery& d) {
    ++runs;
    events += d.expected;
    lost += d.lost();
    duplicates += d.duplicates;
  };
  for (const auto& row : r.throughput) {
    if (row.contender != Contender::pgoutbox_exactly_once || !row.build.empty()) continue;
    count(row.result.delivery);
    const auto* alo = find_row(r, row.scenario, Contender::pgoutbox);
    if (alo == nullptr || (row.events_per_txn != 1 && row.events_per_txn != 10)) continue;
    const double share = 100.0 * row.events_per_second() / alo->events_per_second();
    const double want = row.events_per_txn == 1 ? 70 : 90;
    out += fmt::format("| ≥ {:.0f}% of at-least-once events/s, {} | {:.0f}% ({:.0f} vs {:.0f}) | {} |\n", want,
                       row.scenario, share, row.events_per_second(), alo->events_per_second(), verdict(share >= want));
  }
  for (const auto& row : r.latency) {
    if (row.contender != Contender::pgoutbox_exactly_once || !row.build.empty()) continue;
    count(row.delivery);
    if (row.offered_eps == 1000) {
      out += fmt::format("| p99 commit→visible (read_committed) ≤ 50 ms at 1,000 events/s | {:.1f} ms | {} |\n",
                         row.p99_ms, verdict(row.p99_ms <= 50));
    }
  }
  out += fmt::format(
      "| every event exactly once, in each of the {} exactly-once runs | {} events, {} lost, {} "
      "duplicates | {} |\n",
      runs, events, lost, duplicates, verdict(runs > 0 && lost == 0 && duplicates == 0));
  return out;
}

std::string change(double now, double before) {
  return now > 0 && before > 0 ? fmt::format("{:+.1f}%", 100.0 * (now / before - 1)) : "—";
}

// This build's pgoutbox contenders against the baseline's, scenario by scenario.
std::string baseline_table(const Report& r) {
  std::string out;
  for (const auto& base : r.throughput) {
    const auto* now = base.build.empty() ? nullptr : find_row(r, base.scenario, base.contender);
    if (now == nullptr) continue;
    if (out.empty()) {
      out = fmt::format(
          "| events/txn × payload | events | contender | events/s, this build | events/s, {0} | difference | events/s "
          "after the first record, this build | same, {0} | difference | relay CPU µs/event, this build | same, {0} "
          "|\n"
          "|---|---|---|---|---|---|---|---|---|---|---|\n",
          base.build);
    }
    const double after_now = now->events_per_second_after_start();
    const double after_base = base.events_per_second_after_start();
    const auto rate = [](double v) { return v > 0 ? fmt::format("{:.0f}", v) : "—"; };
    out += fmt::format("| {} | {} | {} | {:.0f} | {:.0f} | {} | {} | {} | {} | {:.1f} | {:.1f} |\n", base.scenario,
                       base.events, name_of(base.contender), now->events_per_second(), base.events_per_second(),
                       change(now->events_per_second(), base.events_per_second()), rate(after_now), rate(after_base),
                       change(after_now, after_base), 1e6 * per_event(now->result.process.cpu_s, now->events),
                       1e6 * per_event(base.result.process.cpu_s, base.events));
  }
  return out;
}

const TopicLimitsRow* find_topic_limits(const Report& r, Contender c, bool limited, bool oversized) {
  for (const auto& row : r.topic_limits) {
    if (row.contender == c && (row.max_message_bytes > 0) == limited && (row.oversized_share > 0) == oversized) {
      return &row;
    }
  }
  return nullptr;
}

std::string topic_limits_table(const Report& r) {
  std::string out =
      "| delivery | topic max.message.bytes | oversized rows | events | events/s | of reference | first record s | "
      "relay CPU µs/event | of reference | in the topic | in the dead-letter topic | duplicates | sessions | ran |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto mode : r.topic_limits_spec.modes) {
    const auto* reference = find_topic_limits(r, mode, false, false);
    for (const auto& row : r.topic_limits) {
      if (row.contender != mode) continue;
      const auto& d = row.result;
      out += fmt::format(
          "| {} | {} | {} | {} | {:.0f} | {} | {:.2f} | {:.2f} | {} | {} | {} | {} | {} | {} |\n",
          mode == Contender::pgoutbox_exactly_once ? "exactly-once" : "at-least-once",
          row.max_message_bytes > 0 ? std::to_string(row.max_message_bytes) : "default (1 MB)",
          row.oversized_share > 0 ? fmt::format("{:g}% of transactions ({})", 100 * row.oversized_share, row.oversized)
                                  : "none",
          row.events, row.events_per_second(),
          reference ? fmt::format("{:.0f}%", 100 * row.events_per_second() / reference->events_per_second()) : "—",
          d.first_seconds, row.cpu_us_per_event(),
          reference ? fmt::format("{:.2f}×", row.cpu_us_per_event() / reference->cpu_us_per_event()) : "—",
          d.delivery.distinct, d.dead_letters.distinct, d.delivery.duplicates + d.dead_letters.duplicates,
          d.sessions ? fmt::format("{:.0f}", *d.sessions) : "—", row.ran);
    }
  }
  return out;
}

}  // namespace

std::string run_header(const Report& r) {
  std::string out;
  out += fmt::format("Command: `{}` — started {} UTC, took {:.0f} s.\n\n", r.command, r.started_utc, r.total_seconds);
  out += fmt::format("Machine: {}\n\n", r.machine);
  out +=
      fmt::format("Load average (1, 5, 15 min): {} at the start, {} at the end.\n\n", r.load_at_start, r.load_at_end);
  return out;
}

std::string to_topic_limits_markdown(const Report& r) {
  const auto& spec = r.topic_limits_spec;
  std::string out = run_header(r);
  out += fmt::format(
      "Each case drains a backlog of {} events (10 per transaction, 200 B payloads, 1,000 keys) committed before "
      "pgoutbox starts, from its own slot, into its own topic ({} partitions) with `poison.policy: dead-letter` into a "
      "dead-letter topic of its own; events/s from pgoutbox's start until a consumer reading both topics with "
      "isolation.level=read_committed has seen every event, each in the topic it belongs in (the run stops if one is "
      "lost or in the other topic, or if exactly-once delivers one twice). Oversized rows: the first event of every "
      "{:.0f}th transaction carries {} B of base64 text from random bytes, which no codec compresses below three "
      "quarters of its size. "
      "Reference = "
      "the same delivery mode into a topic at the broker's default limit with no oversized row. Sessions = pgoutbox's "
      "pgoutbox_sessions_started_total at the end (1: no session restarted). Ran = the case's place in the run, after "
      "an untimed drain of {} events with each mode; the cases without oversized rows share one backlog, written "
      "{}.\n\n",
      spec.events, kPartitions, 1 / spec.oversized_share, spec.oversized_bytes, spec.warmup_events,
      spec.reverse ? "after the other cases ran (`--reverse`)" : "first");
  out += topic_limits_table(r);
  if (!r.topic_limits_latency.empty()) {
    out += fmt::format(
        "\n**Beside a steady load** — {:.0f} events/s of 1-event transactions (200 B) for {:.0f} s into a topic at the "
        "broker's default limit, with `poison.policy: dead-letter`, then the same with one row of {} B (base64 of "
        "random bytes, over the 1 MB limit) every {:.0f} s; latency = commit to visible for a read_committed "
        "consumer, the oversized rows left out; sessions = pgoutbox_sessions_started_total at the end.\n\n",
        spec.latency_rate, spec.latency_seconds, spec.latency_oversized_bytes, spec.oversized_every_s);
    out +=
        "| delivery | oversized rows | events | p50 ms | p99 ms | max ms | behind at end s | sessions |\n"
        "|---|---|---|---|---|---|---|---|\n";
    for (const auto& row : r.topic_limits_latency) {
      out += fmt::format("| {} | {} | {} | {:.1f} | {:.1f} | {:.1f} | {:.2f} | {} |\n",
                         row.contender == Contender::pgoutbox_exactly_once ? "exactly-once" : "at-least-once",
                         row.oversized, row.events, row.p50_ms, row.p99_ms, row.max_ms, row.behind_at_end_s,
                         row.sessions ? fmt::format("{:.0f}", *row.sessions) : "—");
    }
  }
  out += "\n| target | measured | |\n|---|---|---|\n";
  const auto* reference = find_topic_limits(r, Contender::pgoutbox_exactly_once, false, false);
  const auto* limited = find_topic_limits(r, Contender::pgoutbox_exactly_once, true, false);
  const auto* oversized = find_topic_limits(r, Contender::pgoutbox_exactly_once, true, true);
  if (reference != nullptr && oversized != nullptr) {
    const double share = 100 * oversized->events_per_second() / reference->events_per_second();
    out += fmt::format(
        "| exactly-once keeps ≥ 50% of its no-refusal events/s while {:g}% of transactions hold an oversized row "
        "| {:.0f}% ({:.0f} vs {:.0f}; {} of the limited topic's without them) | {} |\n",
        100 * spec.oversized_share, share, oversized->events_per_second(), reference->events_per_second(),
        limited ? fmt::format("{:.0f}%", 100 * oversized->events_per_second() / limited->events_per_second()) : "—",
        verdict(share >= 50));
  }
  for (const auto& row : r.topic_limits_latency) {
    if (row.contender != Contender::pgoutbox_exactly_once || row.oversized == 0) continue;
    out += fmt::format(
        "| exactly-once's lag stays under 1 s with one oversized row every {:.0f} s beside {:.0f} events/s | max "
        "{:.0f} ms, p99 {:.0f} ms; {} oversized rows dead-lettered in {} session(s) | {} |\n",
        spec.oversized_every_s, spec.latency_rate, row.max_ms, row.p99_ms, row.oversized,
        row.sessions ? fmt::format("{:.0f}", *row.sessions) : "—", verdict(row.max_ms < 1000));
  }
  return out;
}

std::string to_markdown(const Report& r) {
  std::string out = run_header(r);
  if (r.busy > 0) {
    out += fmt::format("Busy machine: {} process(es) spinning on the CPU beside every latency run (`--busy {}`).\n\n",
                       r.busy, r.busy);
  }
  out += fmt::format(
      "Polling relay settings: batch {}, {} worker(s), poll interval {} ms after a short batch, sent rows {}d.\n\n",
      r.polling.batch, r.polling.workers, r.polling.poll_interval_ms, r.polling.mark == "delete" ? "delete" : "update");
  out +=
      "**Throughput** — a committed backlog drained by each contender; events/s from the contender's start until a "
      "consumer reading the topic with isolation.level=read_committed during the drain has seen every event "
      "(pg_recvlogical: read to the end position). Costs are per event, over the drain.\n\n";
  out += throughput_table(r);
  out +=
      "\n**Commit-to-visible latency** — the workload writes at a fixed rate (1-event transactions below 5,000 "
      "events/s, 10-event ones from 5,000 on) while the relay runs; behind at end = from the last commit to the last "
      "event visible (a relay that falls behind the rate shows it here); for every contender, latency (p50, p99, max) "
      "= "
      "the time a consumer reading with isolation.level=read_committed during the run received the event minus the "
      "client's commit time (same clock, µs). p99 to ack = the broker's LogAppendTime minus the commit time (1 ms "
      "resolution), for the non-transactional contenders only: exactly-once's records are appended before the "
      "commit that makes them visible. Duplicates are copies beyond the first that consumer saw; no run lost an "
      "event (the bench stops if one does, or if exactly-once delivers one twice). Rows are in the order they "
      "ran.\n\n";
  out += latency_table(r);
  if (const auto stages = stage_table(r); !stages.empty()) {
    out +=
        "\n**Where pgoutbox's time goes** — per transaction, from pgoutbox's own pgoutbox_stage_seconds histograms "
        "over the timed window (docs/operating.md): commit → walsender wrote = the server's commit timestamp (the "
        "Begin message's) to the walsender writing that Begin (the send time of the XLogData around it; the "
        "server's clock, so it holds the commit's WAL flush, the walsender's wake-up and its decoding); → received "
        "= to the Begin reaching pgoutbox (two clocks, the same machine here: socket buffers and pgoutbox's own "
        "wait to run); → handed = to its last "
        "record handed to librdkafka; → acknowledged = to Kafka's acknowledgement (exactly-once: its Kafka commit); "
        "→ confirmable = to its end being confirmable to Postgres (behind earlier transactions). Percentiles are "
        "interpolated inside the buckets (100 µs, 250 µs, 500 µs, 1, 2.5, 5, 10, 25, 50, 100 ms, …). A baseline "
        "from before these histograms shows none. The timeline of each run is "
        "bench/results/timeline-*.png.\n\n";
    out += stages;
  }
  if (!r.scale.empty()) {
    out +=
        "\n**Scale curves** — pgoutbox at-least-once at its defaults draining a backlog while one dimension grows: "
        "payload (bytes; 10-event transactions, about 128 MiB per point), transaction (events per transaction, "
        "200 B), keys (distinct aggregate ids, 200 B, 10 per transaction), backlog (events, for peak RSS). A slot "
        "made before each backlog; events/s as in the throughput table.\n\n";
    out += scale_table(r);
  }
  if (const auto against = baseline_table(r); !against.empty()) {
    out +=
        "\n**This build against the baseline** — the same backlogs drained in this run by this build's pgoutbox and "
        "by the baseline's (a pgoutbox built from another commit), each from its own slot into its own topic, one "
        "after the other (which build goes first alternates from one measurement to the next; `--baseline-first` "
        "starts "
        "with the baseline); difference = this build's figure over the "
        "baseline's, minus 1. The targets below are this "
        "build's alone.\n\n";
    out += against;
  }
  out += "\n**Targets (pgoutbox at-least-once)**\n\n";
  out += targets(r);
  out += "\n**Targets (pgoutbox exactly-once, issue 14)**\n\n";
  out += exactly_once_targets(r);
  return out;
}

std::string to_headline_markdown(const Report& r) {
  // The README's table: one scenario, every contender of this build, with the latency at the
  // lowest offered rate beside it; every other table stays in docs/benchmarks.md.
  const std::string scenario = "10 × 200 B";
  const double rate = 1000;
  std::string out =
      fmt::format("Command: `{}` — started {} UTC, took {:.0f} s. Backlog: {}; latency at {:.0f} events/s.\n\n",
                  r.command, r.started_utc, r.total_seconds, scenario, rate);
  out +=
      "| contender | events/s | of ceiling | first record s | client CPU µs/event | relay peak RSS MiB | extra WAL "
      "B/event | p99 commit→visible ms |\n"
      "|---|---|---|---|---|---|---|---|\n";
  const auto* ceiling = find_row(r, scenario, Contender::recvlogical);
  for (const auto& row : r.throughput) {
    if (row.scenario != scenario || !row.build.empty()) continue;
    const bool relay = row.contender != Contender::recvlogical;
    std::string p99 = "—";
    for (const auto& l : r.latency) {
      if (l.contender == row.contender && l.build.empty() && l.offered_eps == rate)
        p99 = fmt::format("{:.1f}", l.p99_ms);
    }
    out += fmt::format(
        "| {} | {:.0f} | {} | {} | {:.1f} | {} | {:.1f} | {} |\n", label_of(row.contender, row.build),
        row.events_per_second(),
        ceiling ? fmt::format("{:.0f}%", 100.0 * row.events_per_second() / ceiling->events_per_second()) : "—",
        relay ? fmt::format("{:.2f}", row.result.first_seconds) : "—",
        1e6 * per_event(row.result.process.cpu_s, row.events), relay ? mib(row.result.process.peak_rss_kib) : "—",
        per_event(static_cast<double>(row.result.db.wal_bytes), row.events), p99);
  }
  return out;
}

std::string to_json(const Report& r) {
  std::string out = "{\n  \"throughput\": [\n";
  for (std::size_t i = 0; i < r.throughput.size(); ++i) {
    const auto& row = r.throughput[i];
    out += fmt::format(
        "    {{\"scenario\": \"{}\", \"contender\": \"{}\", \"events_per_second\": {:.1f}, "
        "\"events_per_second_after_start\": {:.1f}}}{}\n",
        row.scenario, label_of(row.contender, row.build), row.events_per_second(), row.events_per_second_after_start(),
        i + 1 < r.throughput.size() ? "," : "");
  }
  out += "  ],\n  \"latency\": [\n";
  for (std::size_t i = 0; i < r.latency.size(); ++i) {
    const auto& row = r.latency[i];
    out += fmt::format(
        "    {{\"offered\": {:.0f}, \"contender\": \"{}\", \"p50_ms\": {:.2f}, \"p99_ms\": {:.2f}, \"max_ms\": "
        "{:.2f}, \"timeline\": [{}]}}{}\n",
        row.offered_eps, label_of(row.contender, row.build), row.p50_ms, row.p99_ms, row.max_ms,
        timeline_json(row.timeline), i + 1 < r.latency.size() ? "," : "");
  }
  out += "  ],\n  \"scale\": [\n";
  for (std::size_t i = 0; i < r.scale.size(); ++i) {
    const auto& row = r.scale[i];
    out += fmt::format(
        "    {{\"curve\": \"{}\", \"x\": {}, \"events\": {}, \"events_per_second\": {:.1f}, "
        "\"events_per_second_after_start\": {:.1f}, \"cpu_us_per_event\": {:.2f}, \"peak_rss_mib\": {:.1f}}}{}\n",
        row.curve, row.x, row.events, row.events_per_second(), row.events_per_second_after_start(),
        1e6 * per_event(row.result.process.cpu_s, row.events),
        static_cast<double>(row.result.process.peak_rss_kib) / 1024.0, i + 1 < r.scale.size() ? "," : "");
  }
  out += "  ]\n}\n";
  return out;
}

void write_between_markers(const std::string& path, const std::string& text) {
  write_between_markers(path, text, kBegin, kEnd);
}

}  // namespace pgoutbox::bench
