// The whole comparison in one run: pgoutbox (the real binary, at-least-once and exactly-once)
// against pg_recvlogical -f /dev/null (the ceiling), Debezium's outbox router (Kafka Connect
// standalone, at its defaults and tuned) and a well-written polling relay, on one Postgres 15 and
// one Kafka started here, on this machine.
//
//   build/release/bench/bench_compare [--smoke] [--out-dir DIR] [--readme docs/benchmarks.md]
//                                     [--headline README.md]
//                                     [--baseline-pgoutbox BIN --baseline-name COMMIT [--baseline-first]]
//   build/release/bench/bench_compare --topic-limits [--smoke] [--events-10 N] [--readme docs/benchmarks.md]
//
// For each scenario (events per transaction × payload size) a backlog is committed and each
// contender drains it. Then the workload runs at fixed rates with each relay streaming, for
// commit-to-ack latency, and pgoutbox alone drains the scale curves' backlogs (bench/scale.h;
// the backlog curve's last point is the 1,000,000-event catch-up). With a baseline (a pgoutbox
// built from another commit, scripts/bench.sh --baseline REV) pgoutbox's contenders drain each
// backlog and run each latency load twice, this build and the baseline, and the report adds
// the throughput of one against the other. Which build goes first alternates from one
// measurement to the next; --baseline-first starts the alternation with the baseline, so a second
// run with it puts every measurement in the other order (order and build told apart). Prints
// Markdown, writes it between markers into <out-dir>/RESULTS.md (and docs/benchmarks.md with --readme, and
// the headline table into the README with --headline) and
// the chart's data to <out-dir>/results/results.json. See bench/RESULTS.md for what each figure means.
// With --topic-limits it runs bench/topic_limits.h's cases instead (pgoutbox alone, both delivery
// modes), prints their table and writes it only between the bench-topic-limits markers of --readme.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backlog.h"
#include "contenders.h"
#include "cpu_meter.h"
#include "formats.h"
#include "kafka_client.h"
#include "report.h"
#include "scale.h"
#include "topic_limits.h"
#include "topic_watch.h"
#include "workload.h"

namespace {

using namespace pgoutbox;
using namespace pgoutbox::bench;

struct Scenario {
  int events_per_txn;
  int payload_bytes;
  std::int64_t events;
  std::string label() const {
    return fmt::format(
        "{} × {}", events_per_txn,
        payload_bytes >= 1024 ? fmt::format("{} KB", payload_bytes / 1024) : fmt::format("{} B", payload_bytes));
  }
  std::string tag() const { return fmt::format("t{}_{}", events_per_txn, payload_bytes); }
  BacklogSpec backlog() const {
    BacklogSpec b;
    b.events_per_txn = events_per_txn;
    b.payload_bytes = payload_bytes;
    b.events = events;
    return b;
  }
};

void create_schema(const test::PgCluster& pg, const std::string& source_dir, int polling_workers) {
  pg.exec("CREATE EXTENSION pg_stat_statements");
  pg.exec(
      "CREATE TABLE orders (id bigserial PRIMARY KEY, customer text NOT NULL, total numeric(12,2) NOT NULL, "
      "created_at timestamptz NOT NULL DEFAULT now())");
  pg.exec(read_file(source_dir + "/sql/outbox.sql"));
  pg.exec(read_file(source_dir + "/sql/publication.sql"));
  // The polling relay's table: the same columns plus what polling needs — an ordering column,
  // a status, a shard per worker (a hash of the key, so a key stays with one worker) and a
  // partial index that holds only pending rows.
  pg.exec(
      fmt::format("CREATE TABLE outbox_polled (LIKE outbox INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES, "
                  "seq bigserial NOT NULL, status smallint NOT NULL DEFAULT 0, "
                  "shard smallint NOT NULL GENERATED ALWAYS AS ((hashtext(aggregateid) & 2147483647) % {}) STORED);"
                  "CREATE INDEX outbox_polled_pending ON outbox_polled (shard, seq) WHERE status = 0;"
                  "ALTER TABLE outbox SET (autovacuum_enabled = false);"
                  "ALTER TABLE outbox_polled SET (autovacuum_enabled = false);",
                  polling_workers));
  pg.exec(
      fmt::format("CREATE ROLE {0} LOGIN REPLICATION; CREATE ROLE {1} LOGIN REPLICATION; CREATE ROLE {2} LOGIN;"
                  "CREATE ROLE {3} LOGIN REPLICATION;"
                  "GRANT SELECT ON outbox TO {0}; GRANT SELECT, UPDATE, DELETE ON outbox_polled TO {2};"
                  "GRANT SELECT ON outbox TO {3};",
                  kPgoutboxRole, kRecvlogicalRole, kPollingRole, kDebeziumRole));
}

// The contenders of this run, in the order they run.
using Selection = std::vector<Contender>;

bool selected(const Selection& only, Contender c) { return std::find(only.begin(), only.end(), c) != only.end(); }

// This build, then the baseline when there is one (--baseline-pgoutbox).
using Builds = std::vector<const Bench*>;

// Who runs contender `c`: every build for pgoutbox's contenders, this build alone for the others.
Builds builds_of(const Builds& builds, Contender c) { return is_pgoutbox(c) ? builds : Builds{builds.front()}; }

// Who runs contender `c`, in the order they run: `baseline_first` puts the baseline before this
// build. It alternates from one measurement to the next so that neither build always goes first:
// the first exactly-once drain on the fresh broker also waits for its transaction coordinator, and
// the first latency load after the backlogs runs while Postgres and Kafka still write them out.
Builds in_order(const Builds& builds, Contender c, bool baseline_first) {
  auto runs = builds_of(builds, c);
  if (baseline_first) std::reverse(runs.begin(), runs.end());
  return runs;
}

std::vector<ThroughputRow> measure_throughput(const Builds& builds, const Scenario& s, const Selection& only,
                                              bool baseline_first) {
  const Bench& bench = *builds.front();
  progress(fmt::format("throughput {} ({} events)", s.label(), s.events));
  bench.pg.exec("TRUNCATE orders, outbox, outbox_polled");
  const auto slot_of = [&](const Bench& b, Contender c) { return s.tag() + "_" + b.tag(c); };
  const auto create_slots = [&](Contender c) {
    std::vector<std::string> slots;
    for (const auto* b : builds_of(builds, c)) {
      slots.push_back(slot_of(*b, c));
      bench.pg.exec(fmt::format("SELECT pg_create_logical_replication_slot('{}', 'pgoutput')", slots.back()));
    }
    return slots;
  };
  // One slot per contender (and build) that streams, all made before the backlog is written.
  std::vector<std::string> slots;
  for (const auto c : only) {
    if (c == Contender::polling || c == Contender::pgoutbox_messages) continue;
    for (auto& slot : create_slots(c)) slots.push_back(std::move(slot));
  }
  const WriterCost wal = write_backlog(bench, s.backlog());
  const Lsn end = end_of_backlog(bench);

  std::vector<ThroughputRow> rows;
  // Drains with each build that runs `c`, from its own slot into its own topic.
  auto add = [&](Contender c, const WriterCost& writer) {
    for (const auto* b : in_order(builds, c, baseline_first)) {
      const std::string topic = c == Contender::recvlogical ? "" : "bench." + s.tag() + "." + b->tag(c);
      const DrainResult r = drain(*b, c, slot_of(*b, c), end, topic, s.events);
      progress(fmt::format("  {}: {:.2f} s, {:.0f} events/s, {} duplicates", label_of(c, b->build), r.seconds,
                           static_cast<double>(s.events) / r.seconds, r.delivery.duplicates));
      rows.push_back({s.label(), s.events_per_txn, s.payload_bytes, s.events, writer.wal_per_event,
                      writer.backend_cpu_s_per_event, c, r, b->build});
    }
  };
  for (const auto c : only) {
    if (c == Contender::polling || c == Contender::pgoutbox_messages) continue;
    add(c, wal);
  }
  for (const auto& slot : slots) bench.pg.drop_slot_when_free(slot);

  if (selected(only, Contender::pgoutbox_messages)) {
    // The same events as logical decoding messages: slots of their own, created after the table
    // backlog, so they stream only the messages (and their orders rows, which they ignore).
    const auto message_slots = create_slots(Contender::pgoutbox_messages);
    auto messages = s.backlog();
    messages.messages = true;
    add(Contender::pgoutbox_messages, write_backlog(bench, messages));
    for (const auto& slot : message_slots) bench.pg.drop_slot_when_free(slot);
  }
  if (selected(only, Contender::polling)) {
    auto polled = s.backlog();
    polled.table = "outbox_polled";
    add(Contender::polling, write_backlog(bench, polled));
  }
  return rows;
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto index = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(index, sorted.size() - 1)];
}

// Oversized rows in a latency run (--topic-limits, issue 38 item 4): one transaction in
// 1/share holds one row of `bytes` over the topic's limit, which pgoutbox sends to a dead-letter
// topic of the run's own; it is left out of the latency figures.
struct OversizedRows {
  double share = 0;
  int bytes = 0;
};

LatencyRow measure_latency(const Bench& bench, Contender kind, double rate, double seconds, const std::string& dump_dir,
                           const OversizedRows& oversized = {}) {
  progress(fmt::format(
      "latency {} at {:.0f} events/s for {:.0f} s{}", label_of(kind, bench.build), rate, seconds,
      oversized.share > 0 ? fmt::format(", one oversized row every {:.0f} events", 1 / oversized.share) : ""));
  bench.pg.exec("TRUNCATE orders, outbox, outbox_polled");
  const std::string tag = oversized.share > 0 ? fmt::format("l{:.0f}o", rate) : fmt::format("l{:.0f}", rate);
  const std::string slot = fmt::format("{}_{}", tag, bench.tag(kind));
  const std::string topic = fmt::format("bench.{}.{}", tag, bench.tag(kind));
  const std::string table = table_of(kind);
  if (uses_slot(kind)) {
    bench.pg.exec(fmt::format("SELECT pg_create_logical_replication_slot('{}', 'pgoutput')", slot));
  }
  create_bench_topic(bench, topic);
  // Two seconds at the rate before anything is timed: connections, metadata, the producer id and
  // the JVMs' (Kafka's, Connect's) compilation of the hot path are in place for every contender.
  const auto warmup = std::max<std::int64_t>(100, static_cast<std::int64_t>(rate * 2));
  const auto events = static_cast<std::int64_t>(rate * seconds);
  WorkloadSpec spec;
  spec.events_per_txn = rate >= 5000 ? 10 : 1;
  const auto is_oversized = [&](std::int64_t seq) {
    return oversized.share > 0 && seq >= warmup && oversized_event(seq - warmup, spec.events_per_txn, oversized.share);
  };
  TopicWatch watch(bench.kafka.bootstrap(), topic, kPartitions, warmup + events,
                   oversized.share > 0 ? Belongs([&](std::int64_t seq) { return !is_oversized(seq); }) : Belongs{});
  const std::string dead_letter_topic = oversized.share > 0 ? topic + ".dlq" : "";
  std::optional<TopicWatch> dead_letters;
  if (!dead_letter_topic.empty()) {
    create_bench_topic(bench, dead_letter_topic);
    dead_letters.emplace(bench.kafka.bootstrap(), dead_letter_topic, kPartitions, warmup + events, is_oversized);
  }

  spec.dsn = bench.pg.dsn();
  spec.outbox_table = table;
  // 1-event transactions; from 5,000 events/s on, 10-event ones (500 synchronous commits/s is
  // what this machine's disk and cores sustain beside everything else): set above.
  spec.payload_bytes = 200;
  // Synchronous commits wait for the WAL flush; enough sessions that the offered rate is met.
  spec.connections = std::max(2, static_cast<int>(rate / spec.events_per_txn / 250));
  spec.synchronous_commit = true;

  DbProbe probe(bench.pg, role_of(kind), table);
  RelayProcess relay(bench, kind, topic, slot, dead_letter_topic);
  spec.events = warmup;
  spec.events_per_second = rate;
  run_workload(spec);
  if (!watch.wait_for(warmup, std::chrono::minutes(2), [&] { return relay.running(); })) {
    throw std::runtime_error("warm-up events never arrived:\n" + test::tail_of(relay.log_path()));
  }
  probe.begin();
  StageProbe stages(relay.metrics_port());
  if (is_pgoutbox(kind)) stages.begin();
  const double cpu_before = process_cpu_seconds(relay.pid());
  const auto t0 = std::chrono::steady_clock::now();
  spec.first_seq = warmup;
  spec.events = events;
  spec.events_per_second = rate;
  spec.oversized_share = oversized.share;
  spec.oversized_bytes = oversized.bytes;
  const auto written = run_workload(spec);
  // Waits as long as events keep arriving (exactly-once may be minutes behind the load), up to
  // 10 minutes.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  for (std::int64_t before = -1;
       !watch.wait_for(watch.expected(), std::chrono::seconds(30), [&] { return relay.running(); });) {
    if (!relay.running() || watch.distinct() == before || std::chrono::steady_clock::now() > give_up) {
      throw std::runtime_error(fmt::format("{} of {} events arrived:\n{}", watch.distinct() - warmup, spec.events,
                                           test::tail_of(relay.log_path())));
    }
    before = watch.distinct();
    progress(fmt::format("  {} of {} events visible so far", before - warmup, spec.events));
  }
  const double run_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  probe.stop_sampling();
  LatencyRow row;
  row.offered_eps = rate;
  row.achieved_eps = static_cast<double>(spec.events) / written.seconds;
  row.contender = kind;
  row.build = bench.build;
  row.events = spec.events;
  if (dead_letters) {
    if (!dead_letters->wait_for(dead_letters->expected(), std::chrono::minutes(2), [&] { return relay.running(); }))
      throw std::runtime_error(fmt::format("{} of {} oversized rows reached the dead-letter topic:\n{}",
                                           dead_letters->distinct(), dead_letters->expected(),
                                           test::tail_of(relay.log_path())));
    row.oversized = dead_letters->expected();
  }
  if (is_pgoutbox(kind)) {
    row.stages = stages.end();
    row.sessions = metric_value(relay.metrics_port(), "pgoutbox_sessions_started_total");
  }
  row.process = relay.finish();
  row.process.cpu_s -= cpu_before;
  row.seconds = run_seconds;
  row.behind_at_end_s = std::max(0.0, run_seconds - written.seconds);
  row.db = probe.end();
  if (uses_slot(kind)) bench.pg.drop_slot_when_free(slot);
  row.delivery = watch.finish(std::chrono::minutes(2));
  check_delivery(kind, topic, row.delivery);

  // To visible: the consumer's receive time; to the ack: the broker's LogAppendTime, which for
  // a transactional record is its append, before the commit that makes it visible.
  const bool transactional = kind == Contender::pgoutbox_exactly_once;
  std::vector<double> latencies, to_ack;
  std::vector<std::int64_t> commits;
  std::ofstream dump;
  if (!dump_dir.empty()) {
    dump.open(fmt::format("{}/latency-{}-{}.csv", dump_dir, tag, bench.tag(kind)));
    dump << "seq,commit_us,visible_us,append_ms\n";
  }
  for (std::int64_t seq = spec.first_seq; seq < spec.first_seq + events; ++seq) {
    if (is_oversized(seq)) continue;
    const auto i = static_cast<std::size_t>(seq);
    const auto commit_us = written.commit_us[static_cast<std::size_t>(seq - spec.first_seq)];
    latencies.push_back(static_cast<double>(watch.visible_us()[i] - commit_us) / 1000.0);
    commits.push_back(commit_us);
    if (!transactional)
      to_ack.push_back(static_cast<double>(watch.broker_ms()[i]) - static_cast<double>(commit_us) / 1000.0);
    if (dump.is_open()) {
      dump << fmt::format("{},{},{},{}\n", seq, commit_us, watch.visible_us()[i], watch.broker_ms()[i]);
    }
  }
  row.timeline = timeline_of(commits, latencies);
  std::sort(to_ack.begin(), to_ack.end());
  if (!transactional) row.p99_ack_ms = percentile(to_ack, 0.99);
  std::sort(latencies.begin(), latencies.end());
  row.p50_ms = percentile(latencies, 0.50);
  row.p99_ms = percentile(latencies, 0.99);
  row.max_ms = latencies.back();
  progress(fmt::format("  visible: p50 {:.1f} ms, p99 {:.1f} ms, max {:.1f} ms; {} duplicates", row.p50_ms, row.p99_ms,
                       row.max_ms, row.delivery.duplicates));
  return row;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M", std::gmtime(&now));
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "pgoutbox (both delivery modes, and the message outbox) against pg_recvlogical (the ceiling), Debezium and a "
      "polling relay, then pgoutbox's scale curves, in one run"};
  bool smoke = false;
  // Sized so that the whole run, Debezium's two settings included, takes under 20 minutes on 2
  // cores; the 1,000,000-event catch-up is the backlog curve's last point (pgoutbox alone).
  std::int64_t events_1 = 50'000, events_10 = 300'000, events_1000 = 200'000;
  double large_share = 0.5;  // 2 KB scenarios write this share of the 200 B scenario's events
  double latency_seconds = 8;
  int busy = 0;
  std::vector<double> rates = {1000, 5000, 10000};
  bool scale = true;
  std::string out_dir = PGOUTBOX_SOURCE_DIR "/bench";
  std::string command = "scripts/bench.sh";
  std::string pgoutbox_bin = PGOUTBOX_BINARY;
  std::string polling_bin = PGOUTBOX_POLLING_RELAY;
  PollingTuning polling;
  // The contenders by their option names, in the order they run.
  const std::vector<std::pair<std::string, Contender>> all = {
      {"pg_recvlogical", Contender::recvlogical},
      {"pgoutbox", Contender::pgoutbox},
      {"pgoutbox-exactly-once", Contender::pgoutbox_exactly_once},
      {"pgoutbox-messages", Contender::pgoutbox_messages},
      {"debezium", Contender::debezium},
      {"debezium-tuned", Contender::debezium_tuned},
      {"polling", Contender::polling}};
  std::vector<std::string> contenders, names;
  for (const auto& [name, c] : all) names.push_back(name);
  contenders = names;
  std::vector<std::string> only_scenarios;
  app.add_option("--contenders", contenders, "which contenders run (" + fmt::format("{}", fmt::join(names, ", ")) + ")")
      ->delimiter(',')
      ->check(CLI::IsMember(names));
  app.add_option("--scenarios", only_scenarios, "only these throughput scenarios, as TXN_PAYLOAD (10_200, 1000_2048)")
      ->delimiter(',');
  app.add_flag("--smoke", smoke, "a minimal run (seconds, tiny sizes) that proves the runner works");
  bool formats = false;
  FormatsSpec formats_spec;
  app.add_flag("--formats", formats,
               "run bench/formats.h's cases instead: the record formats' cost against format string on the backlog "
               "drain, its table written between the bench-formats markers of --readme");
  bool topic_limits = false;
  TopicLimitsSpec limits;
  app.add_flag("--topic-limits", topic_limits,
               "instead of the comparison: pgoutbox (both delivery modes) into a topic at the broker's default limit, "
               "into one with a small max.message.bytes, and into that one while a share of the transactions hold an "
               "oversized row (dead-lettered), each draining a 10 × 200 B backlog of --events-10 events");
  app.add_option("--max-message-bytes", limits.max_message_bytes, "--topic-limits: the limited topic's limit");
  app.add_option("--oversized-share", limits.oversized_share,
                 "--topic-limits: share of the transactions holding one oversized row")
      ->check(CLI::Range(0.0001, 1.0));
  app.add_option("--oversized-bytes", limits.oversized_bytes, "--topic-limits: an oversized row's payload size");
  app.add_option("--oversized-every", limits.oversized_every_s,
                 "--topic-limits: seconds between two oversized rows in the latency runs beside a steady load");
  app.add_option("--limits-latency-seconds", limits.latency_seconds,
                 "--topic-limits: seconds of load per latency run (0: none)");
  app.add_flag("--reverse", limits.reverse,
               "--topic-limits: the cases in the reverse order (a second run with it puts each case in the other "
               "place)");
  app.add_option("--events-1", events_1, "backlog of the 1-event-transaction scenarios (200 B)");
  auto* events_10_option =
      app.add_option("--events-10", events_10, "backlog of the 10-event scenarios (200 B): the catch-up backlog");
  app.add_option("--events-1000", events_1000, "backlog of the 1,000-event scenarios (200 B)");
  app.add_option("--large-share", large_share, "share of those events the 2 KB scenarios write");
  app.add_option("--latency-seconds", latency_seconds, "seconds of load per latency run (0: no latency runs)");
  app.add_option("--rates", rates, "offered rates for the latency runs (events/s)")->delimiter(',');
  app.add_option("--busy", busy,
                 "this many processes spin on the CPU beside every latency run (a busy machine); the throughput "
                 "runs and the scale curves run without them")
      ->check(CLI::Range(0, 64));
  app.add_flag("!--no-scale", scale,
               "skip the scale curves (pgoutbox alone as payload, transaction size, keys and backlog grow)");
  std::string dump_dir;
  app.add_option("--latency-csv", dump_dir, "also write every event's commit and append time to DIR/latency-*.csv");
  app.add_option("--out-dir", out_dir, "RESULTS.md and results/ are written here");
  std::string readme;
  app.add_option("--readme", readme, "also write the tables between the bench markers of this file");
  std::string headline;
  app.add_option("--headline", headline,
                 "also write the headline table between the bench-headline markers of this file (the README)");
  app.add_option("--command", command, "the command to name in the results");
  app.add_option("--pgoutbox", pgoutbox_bin, "the pgoutbox binary");
  std::string baseline_bin, baseline_name;
  app.add_option("--baseline-pgoutbox", baseline_bin,
                 "a pgoutbox built from another commit: pgoutbox's contenders also run with it, beside this build, in "
                 "the same run (throughput and latency; the scale curves are this build's alone)");
  std::vector<std::string> kafka_settings, baseline_kafka_settings;
  app.add_option("--kafka-setting", kafka_settings,
                 "a `key: value` line added to this build's pgoutbox `kafka:` section (repeatable), e.g. "
                 "\"send_when_caught_up: false\"");
  app.add_option("--baseline-kafka-setting", baseline_kafka_settings,
                 "the same for the baseline's runs; with --baseline-pgoutbox naming this build's binary, an A/B of "
                 "a setting in one run");
  app.add_option("--baseline-name", baseline_name, "the baseline's name in the tables (its commit)");
  bool baseline_first = false;
  app.add_flag("--baseline-first", baseline_first,
               "the baseline goes first in the first measurement (the order alternates from there): a second run "
               "with this flag puts every measurement in the other order");
  app.add_option("--polling-relay", polling_bin, "the polling relay binary");
  const char* libs_env = std::getenv("PGOUTBOX_DEBEZIUM_LIBS");
  std::string debezium_libs = libs_env != nullptr && *libs_env != '\0' ? libs_env : PGOUTBOX_DEBEZIUM_LIBS;
  app.add_option("--debezium-libs", debezium_libs,
                 "the Debezium and Kafka Connect jars (scripts/setup.sh puts them in .deps/debezium/libs; default "
                 "PGOUTBOX_DEBEZIUM_LIBS or that)");
  app.add_option("--polling-batch", polling.batch, "rows the polling relay claims per transaction");
  app.add_option("--polling-workers", polling.workers, "polling relay workers");
  app.add_option("--polling-interval-ms", polling.poll_interval_ms, "polling relay sleep after a short batch");
  app.add_option("--polling-mark", polling.mark, "delete or update sent rows")
      ->check(CLI::IsMember({"delete", "update"}));
  CLI11_PARSE(app, argc, argv);
  // A rate names its latency run's slot and topic: a repeated one would read the first run's
  // events again as its own (duplicates, negative latencies).
  if (std::set<double>(rates.begin(), rates.end()).size() != rates.size()) {
    std::fprintf(stderr, "bench: --rates lists a rate twice; run the command again instead\n");
    return 1;
  }
  if (smoke) {
    // Exactly-once commits a Kafka transaction only about every 10 s on this build (see
    // bench/RESULTS.md): the smoke run drains a small backlog with it and times only the
    // others in the latency run, so it fits the test's timeout (bench/CMakeLists.txt).
    events_10 = 500;
    large_share = 0;
    only_scenarios = {"10_200"};
    latency_seconds = 1;
    rates = {1000};
  }

  Selection only;
  for (const auto& [name, c] : all) {
    if (std::find(contenders.begin(), contenders.end(), name) != contenders.end()) only.push_back(c);
  }
  const bool debezium =
      !topic_limits && !formats && (selected(only, Contender::debezium) || selected(only, Contender::debezium_tuned));
  if (debezium && !std::filesystem::exists(debezium_libs + "/debezium-connector-postgres-3.6.1.Final.jar")) {
    std::fprintf(stderr, "bench: the Debezium jars are not in %s; run scripts/setup.sh (or --debezium-libs DIR)\n",
                 debezium_libs.c_str());
    return 1;
  }
  if ((topic_limits || formats) && !baseline_bin.empty()) {
    std::fprintf(stderr, "bench: --topic-limits and --formats run this build alone (no --baseline-pgoutbox)\n");
    return 1;
  }
  if (!baseline_bin.empty() && !std::filesystem::exists(baseline_bin)) {
    std::fprintf(stderr, "bench: no baseline binary at %s\n", baseline_bin.c_str());
    return 1;
  }
  const auto started = std::chrono::steady_clock::now();
  Report report;
  report.command = command;
  report.started_utc = utc_now();
  report.machine = describe_machine();
  report.load_at_start = load_average();
  report.polling = polling;
  std::vector<FormatsRow> formats_rows;
  try {
    std::filesystem::create_directories(out_dir + "/results");
    test::ScratchDir scratch("bench", std::nullopt);
    progress("starting Postgres 15 and Kafka");
    test::PgCluster pg({{"shared_preload_libraries", "pg_stat_statements"},
                        {"shared_buffers", "256MB"},
                        {"max_wal_size", "8GB"},
                        {"checkpoint_timeout", "30min"}});
    test::KafkaBroker kafka;
    // The bench makes its slots by hand, before the backlogs: as a deployment that does so, it
    // makes the checkpoint topic first (exactly-once refuses a slot older than a missing
    // checkpoint topic, exit 25: its checkpoints would be lost).
    test::create_topic(kafka.bootstrap(), "pgoutbox.checkpoints", 1, {{"cleanup.policy", "compact"}});
    create_schema(pg, PGOUTBOX_SOURCE_DIR, polling.workers);
    Bench bench{pg, kafka, pgoutbox_bin, polling_bin, scratch.path(), polling, PGOUTBOX_JAVA, debezium_libs, "",
                {}, {}};
    bench.kafka_settings = kafka_settings;
    Bench baseline = bench;
    baseline.kafka_settings = baseline_kafka_settings;
    baseline.pgoutbox_bin = baseline_bin;
    baseline.build = baseline_name.empty() ? "baseline" : "baseline " + baseline_name;
    const Builds builds = baseline_bin.empty() ? Builds{&bench} : Builds{&bench, &baseline};

    if (formats) {
      // Its own default unless --events-10 is given: a drain long enough that starting and
      // stopping weigh nothing in it.
      if (smoke || events_10_option->count() > 0) formats_spec.events = smoke ? 2000 : events_10;
      if (smoke) {
        formats_spec.warmup_events = 100;
        formats_spec.rounds = 1;
      }
      formats_rows = measure_formats(bench, formats_spec);
    } else if (topic_limits) {
      // pgoutbox alone, both delivery modes (or those of --contenders), on the catch-up backlog.
      limits.events = smoke ? 2000 : events_10;
      if (smoke) limits.warmup_events = 100;
      limits.modes.clear();
      for (const auto c : {Contender::pgoutbox_exactly_once, Contender::pgoutbox}) {
        if (selected(only, c)) limits.modes.push_back(c);
      }
      if (smoke) {
        limits.latency_seconds = 3;
        limits.oversized_every_s = 1;
      }
      report.topic_limits_spec = limits;
      report.topic_limits = measure_topic_limits(bench, limits);
      const OversizedRows rows{.share = 1 / (limits.latency_rate * limits.oversized_every_s),
                               .bytes = limits.latency_oversized_bytes};
      for (const auto mode : limits.latency_seconds > 0 ? limits.modes : std::vector<Contender>{}) {
        for (const auto& with : {OversizedRows{}, rows}) {
          report.topic_limits_latency.push_back(
              measure_latency(bench, mode, limits.latency_rate, limits.latency_seconds, dump_dir, with));
        }
      }
    } else {
      std::vector<Scenario> scenarios = {{1, 200, events_1}, {10, 200, events_10}, {1000, 200, events_1000}};
      if (large_share > 0) {
        for (const auto& s : std::vector<Scenario>(scenarios)) {
          scenarios.push_back(
              {s.events_per_txn, 2048,
               std::max<std::int64_t>(s.events_per_txn,
                                      static_cast<std::int64_t>(static_cast<double>(s.events) * large_share))});
        }
      }
      for (const auto& s : scenarios) {
        const bool wanted = only_scenarios.empty() || std::find(only_scenarios.begin(), only_scenarios.end(),
                                                                s.tag().substr(1)) != only_scenarios.end();
        if (!wanted) continue;
        for (auto& row : measure_throughput(builds, s, only, baseline_first)) {
          report.throughput.push_back(std::move(row));
        }
        baseline_first = !baseline_first;
      }
      // A busy machine: spinning processes beside the latency runs, killed when they end.
      std::vector<std::unique_ptr<test::ChildProcess>> hogs;
      if (latency_seconds > 0) {
        for (int i = 0; i < busy; ++i) {
          hogs.push_back(std::make_unique<test::ChildProcess>(
              test::ChildProcess::Options{.argv = {"/bin/sh", "-c", "while :; do :; done"},
                                          .log_path = "/dev/null",
                                          .run_as = {},
                                          .extra_env = {}}));
        }
      }
      report.busy = busy;
      for (const double rate : latency_seconds > 0 ? rates : std::vector<double>{}) {
        for (const auto c : only) {
          if (c == Contender::recvlogical || c == Contender::pgoutbox_messages) continue;
          if (c == Contender::pgoutbox_exactly_once && smoke) continue;
          for (const auto* b : in_order(builds, c, baseline_first)) {
            report.latency.push_back(measure_latency(*b, c, rate, latency_seconds, dump_dir));
          }
          if (builds_of(builds, c).size() > 1) baseline_first = !baseline_first;
        }
      }
      hogs.clear();
      if (scale && selected(only, Contender::pgoutbox)) {
        for (const auto& point : scale_points(smoke)) report.scale.push_back(measure_scale_point(bench, point));
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench failed: %s\n", e.what());
    return 1;
  }
  report.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  report.load_at_end = load_average();
  if (formats) {
    const std::string markdown = to_formats_markdown(formats_rows, formats_spec, run_header(report));
    std::printf("%s", markdown.c_str());
    if (!readme.empty()) {
      write_between_markers(readme, markdown, "<!-- bench-formats:begin -->", "<!-- bench-formats:end -->");
    }
    progress(fmt::format("formats: done in {:.0f} s", report.total_seconds));
    return 0;
  }
  if (topic_limits) {
    const std::string markdown = to_topic_limits_markdown(report);
    std::printf("%s", markdown.c_str());
    if (!readme.empty()) {
      write_between_markers(readme, markdown, "<!-- bench-topic-limits:begin -->", "<!-- bench-topic-limits:end -->");
    }
    progress(fmt::format("topic limits: done in {:.0f} s", report.total_seconds));
    return 0;
  }

  const std::string markdown = to_markdown(report);
  std::printf("%s", markdown.c_str());
  write_between_markers(out_dir + "/RESULTS.md", markdown);
  if (!readme.empty()) write_between_markers(readme, markdown);
  if (!headline.empty()) {
    write_between_markers(headline, to_headline_markdown(report), "<!-- bench-headline:begin -->",
                          "<!-- bench-headline:end -->");
  }
  std::ofstream(out_dir + "/results/results.json", std::ios::trunc) << to_json(report);
  progress(fmt::format("wrote {}/RESULTS.md and {}/results/results.json in {:.0f} s", out_dir, out_dir,
                       report.total_seconds));
  return 0;
}
