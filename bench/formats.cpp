#include "formats.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "backlog.h"
#include "kafka_client.h"

namespace pgoutbox::bench {
namespace {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

BacklogSpec backlog_of(std::int64_t events) {
  BacklogSpec b;
  b.events_per_txn = 10;
  b.payload_bytes = 200;
  b.events = events;
  return b;
}

// Each case on its own slot, all made before the backlog; drained in `order`.
void drain_round(const Bench& bench, std::vector<FormatsRow>& rows, const std::vector<std::size_t>& order,
                 std::int64_t events, const std::string& round, bool timed) {
  bench.pg.exec("TRUNCATE orders, outbox");
  for (const auto i : order) {
    bench.pg.exec(
        fmt::format("SELECT pg_create_logical_replication_slot('{}{}', 'pgoutput')", rows[i].format.tag, round));
  }
  write_backlog(bench, backlog_of(events));
  const Lsn end = end_of_backlog(bench);
  for (const auto i : order) {
    auto& row = rows[i];
    Bench formatted = bench;
    formatted.pgoutbox_env = row.format.env;
    const std::string slot = row.format.tag + round;
    const std::string topic = "bench." + slot;
    auto result = drain(formatted, Contender::pgoutbox, slot, end, topic, events);
    progress(fmt::format("  {}{}: {:.2f} s, {:.0f} events/s, {:.2f} µs CPU/event", row.format.name,
                         timed ? "" : " (warm-up)", result.seconds, static_cast<double>(events) / result.seconds,
                         1e6 * result.process.cpu_s / static_cast<double>(events)));
    if (timed) {
      if (row.value_bytes == 0) {
        const auto sample = test::read_topic(bench.kafka.bootstrap(), topic, 100, std::chrono::seconds(30));
        std::int64_t bytes = 0;
        for (const auto& r : sample) bytes += static_cast<std::int64_t>(r.value ? r.value->size() : 0);
        row.value_bytes = sample.empty() ? 0 : bytes / static_cast<std::int64_t>(sample.size());
      }
      row.events = events;
      row.runs.push_back(std::move(result));
    }
  }
  for (const auto i : order) bench.pg.drop_slot_when_free(rows[i].format.tag + round);
}

}  // namespace

double FormatsRow::events_per_second() const {
  std::vector<double> v;
  for (const auto& r : runs) v.push_back(static_cast<double>(events) / r.seconds);
  return median(v);
}

double FormatsRow::cpu_us_per_event() const {
  std::vector<double> v;
  for (const auto& r : runs) v.push_back(1e6 * r.process.cpu_s / static_cast<double>(events));
  return median(v);
}

std::vector<FormatCase> format_cases() {
  const std::string json = "PGOUTBOX_TABLES_0_FORMAT_TYPE=debezium-json";
  return {{"string", "fmt_string", {}},
          {"debezium-json, schemas", "fmt_djs", {json}},
          {"debezium-json, no schemas", "fmt_djn", {json, "PGOUTBOX_TABLES_0_FORMAT_SCHEMAS=false"}},
          {"debezium-json, schemas, expanded payload",
           "fmt_djx",
           {json, "PGOUTBOX_TABLES_0_FORMAT_EXPAND_JSON_PAYLOAD=true"}},
          {"cloudevents-binary", "fmt_ceb", {"PGOUTBOX_TABLES_0_FORMAT_TYPE=cloudevents-binary"}},
          {"cloudevents-structured", "fmt_ces", {"PGOUTBOX_TABLES_0_FORMAT_TYPE=cloudevents-structured"}},
          {"string, 3 provenance headers more (control)", "fmt_prov", {"PGOUTBOX_PROVENANCE_HEADERS=true"}, true}};
}

std::vector<FormatsRow> measure_formats(const Bench& bench, const FormatsSpec& spec) {
  std::vector<FormatsRow> rows;
  for (auto& c : format_cases()) rows.push_back({std::move(c), 0, {}, 0});
  std::vector<std::size_t> order(rows.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (spec.warmup_events > 0) {
    progress(fmt::format("formats: warm-up ({} events each, untimed)", spec.warmup_events));
    drain_round(bench, rows, order, spec.warmup_events, "_w", false);
  }
  for (int round = 0; round < spec.rounds; ++round) {
    progress(fmt::format("formats: round {} of {}, {} events each{}", round + 1, spec.rounds, spec.events,
                         round % 2 == 1 ? ", in the reverse order" : ""));
    auto ordered = order;
    if (round % 2 == 1) std::reverse(ordered.begin(), ordered.end());
    drain_round(bench, rows, ordered, spec.events, fmt::format("_r{}", round), true);
  }
  return rows;
}

std::string to_formats_markdown(const std::vector<FormatsRow>& rows, const FormatsSpec& spec,
                                const std::string& header) {
  std::string out = header;
  out += fmt::format(
      "Each case drains a backlog of {} events (10 per transaction, 200 B jsonb payloads, varchar keys) committed "
      "before pgoutbox starts, at-least-once, from its own slot into its own topic, until a read_committed consumer "
      "has seen every event; {} rounds, every other one in the reverse order, after an untimed drain of {} events "
      "each; the figures are the rounds' medians. Value bytes = the mean size of a record's value as a consumer "
      "reads it. The control is format string with provenance_headers: three headers more than string (cloudevents-"
      "binary has six more), to show what headers alone cost; it has no target.\n\n",
      spec.events, spec.rounds, spec.warmup_events);
  out +=
      "| format | value bytes | events/s | of string | relay CPU µs/event | of string |\n"
      "|---|---|---|---|---|---|\n";
  const FormatsRow* reference = rows.empty() ? nullptr : &rows.front();
  for (const auto& row : rows) {
    out += fmt::format("| {} | {} | {:.0f} | {:.0f}% | {:.2f} | {:.2f}× |\n", row.format.name, row.value_bytes,
                       row.events_per_second(),
                       reference ? 100 * row.events_per_second() / reference->events_per_second() : 0,
                       row.cpu_us_per_event(), reference ? row.cpu_us_per_event() / reference->cpu_us_per_event() : 0);
  }
  out += "\n| target | measured | |\n|---|---|---|\n";
  for (const auto& row : rows) {
    if (reference == nullptr || &row == reference || row.format.control) continue;
    const double share = row.events_per_second() / reference->events_per_second();
    out += fmt::format("| {} within 10% of string's events/s at the backlog drain | {:.0f}% | {} |\n", row.format.name,
                       100 * share, share >= 0.9 ? "met" : "**missed**");
  }
  return out;
}

}  // namespace pgoutbox::bench
