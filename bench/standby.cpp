// pgoutbox on the primary against pgoutbox on a hot standby of the same data (docs/versions.md,
// "Decoding on a standby"): what decoding costs the business database, in one run on one machine.
//
// A primary (Postgres 16+, the npm server binaries: PGOUTBOX_TEST_PG_MAJOR) with the outbox and
// its publication, a hot standby from a base backup (hot_standby_feedback, a physical slot), one
// logical slot on each made before the backlog, so both hold the same committed events. Then:
//  - the backlog drain, each relay alone: events/s until a read_committed consumer has seen every
//    event, and the CPU seconds of the primary's processes (postmaster, its children alive, and
//    those it reaped: /proc/PID/stat utime+stime and cutime+cstime) and of the standby's, per
//    100,000 events;
//  - latency at a steady commit rate on the primary, both relays running: commit → visible to a
//    read_committed consumer, p50/p99/max (the standby's includes its replay).
// It prints a table and, with --readme FILE, writes it between FILE's bench-standby markers.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kafka_broker.h"
#include "kafka_client.h"
#include "pg_cluster.h"
#include "pg_standby.h"
#include "pgoutbox_process.h"
#include "results_file.h"
#include "topic_watch.h"
#include "workload.h"

namespace pgoutbox::bench {
namespace {

using namespace std::chrono_literals;

constexpr int kPartitions = 3;

// CPU seconds a cluster's processes have used: the postmaster, its children alive now, and the
// children it has reaped (a backend that ended is in the postmaster's cutime/cstime).
double cluster_cpu_seconds(const test::PgCluster& pg) {
  std::ifstream pidfile(pg.data_dir() + "/postmaster.pid");
  long postmaster = 0;
  pidfile >> postmaster;
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  double total = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const auto name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::ifstream in(entry.path() / "stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::vector<std::string> f{"pid", "comm"};  // fields 1 and 2, so f[n] is field n+1
    for (std::string field; rest >> field;) f.push_back(field);
    if (f.size() < 17) continue;
    const long pid = std::stol(name);
    const long ppid = std::stol(f[3]);
    if (pid != postmaster && ppid != postmaster) continue;
    total += static_cast<double>(std::stoull(f[13]) + std::stoull(f[14])) / tick;
    if (pid == postmaster) total += static_cast<double>(std::stoull(f[15]) + std::stoull(f[16])) / tick;
  }
  return total;
}

struct Side {
  std::string name;  // "primary", "standby"
  const test::PgCluster* server = nullptr;
  std::string slot;
  std::string topic_prefix;  // the relay's topics: <prefix>.<aggregatetype>
};

struct Row {
  std::string source;
  std::int64_t events = 0;
  double events_per_s = 0;
  double primary_cpu_per_100k = 0;
  double standby_cpu_per_100k = 0;
  Delivery drain;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  Delivery latency;
};

class StandbyBench {
 public:
  StandbyBench(std::string binary, std::string scratch) : binary_(std::move(binary)), scratch_(std::move(scratch)) {
    primary_.exec(
        "CREATE TABLE orders (id bigserial PRIMARY KEY, customer text NOT NULL, total numeric(12,2) NOT NULL, "
        "created_at timestamptz NOT NULL DEFAULT now())");
    primary_.exec(read_file(std::string(PGOUTBOX_SOURCE_DIR) + "/sql/outbox.sql"));
    primary_.exec(read_file(std::string(PGOUTBOX_SOURCE_DIR) + "/sql/publication.sql"));
    standby_ = test::make_standby(primary_, "bench_standby", {{"hot_standby_feedback", "on"}});
    sides_ = {{"primary", &primary_, "bench_on_primary", "onprimary"},
              {"standby", standby_.get(), "bench_on_standby", "onstandby"}};
    primary_.exec("SELECT pg_create_logical_replication_slot('bench_on_primary', 'pgoutput')");
    // A slot on a standby waits for a running-transactions record from the primary: ask for one
    // while the creation waits.
    std::thread ask([this] {
      for (int i = 0; i < 50 && !standby_->query_value("SELECT 1 FROM pg_replication_slots WHERE slot_name = "
                                                       "'bench_on_standby' AND confirmed_flush_lsn IS NOT NULL");
           ++i) {
        std::this_thread::sleep_for(200ms);
        primary_.exec("SELECT pg_log_standby_snapshot()");
      }
    });
    standby_->exec("SELECT pg_create_logical_replication_slot('bench_on_standby', 'pgoutput')");
    ask.join();
  }

  std::vector<Row> run(std::int64_t backlog_events, double latency_rate, double latency_seconds) {
    std::vector<Row> rows;
    for (const auto& side : sides_) {
      Row row;
      row.source = side.name;
      rows.push_back(row);
    }
    progress(fmt::format("writing a backlog of {} events (10 per transaction, 200 B) on the primary", backlog_events));
    for (const auto& side : sides_) create_topic(side.topic_prefix + ".Backlog");
    WorkloadSpec backlog;
    backlog.dsn = primary_.dsn();
    backlog.aggregate_type = "Backlog";
    backlog.events = backlog_events;
    run_workload(backlog);
    test::wait_replayed(primary_, *standby_);
    for (std::size_t i = 0; i < sides_.size(); ++i) drain(sides_[i], backlog_events, rows[i]);

    const auto latency_events = static_cast<std::int64_t>(latency_rate * latency_seconds);
    if (latency_events <= 0) return rows;
    progress(fmt::format("latency: {} events/s for {} s on the primary, both relays running", latency_rate,
                         latency_seconds));
    std::vector<std::unique_ptr<test::PgoutboxProcess>> relays;
    std::vector<std::unique_ptr<TopicWatch>> watches;
    for (const auto& side : sides_) {
      create_topic(side.topic_prefix + ".Latency");
      watches.push_back(std::make_unique<TopicWatch>(kafka_.bootstrap(), side.topic_prefix + ".Latency", kPartitions,
                                                     latency_events));
      relays.push_back(start_relay(side, "latency"));
    }
    primary_.exec("TRUNCATE outbox");  // event ids restart at 0 (the publication sends inserts only)
    WorkloadSpec steady;
    steady.dsn = primary_.dsn();
    steady.aggregate_type = "Latency";
    steady.events = latency_events;
    steady.events_per_second = latency_rate;
    const auto written = run_workload(steady);
    for (std::size_t i = 0; i < sides_.size(); ++i) {
      watches[i]->wait_for(latency_events, 120s, [] { return true; });
      rows[i].latency = watches[i]->finish(60s);
      std::vector<double> ms;
      const auto& visible = watches[i]->visible_us();
      for (std::size_t e = 0; e < visible.size() && e < written.commit_us.size(); ++e) {
        if (visible[e] > 0) ms.push_back(static_cast<double>(visible[e] - written.commit_us[e]) / 1000.0);
      }
      std::sort(ms.begin(), ms.end());
      if (!ms.empty()) {
        const auto at = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<std::size_t>(q * ms.size()))]; };
        rows[i].p50_ms = at(0.50);
        rows[i].p99_ms = at(0.99);
        rows[i].max_ms = ms.back();
      }
      relays[i]->signal(SIGTERM);
      (void)relays[i]->wait_exit(30s);
    }
    return rows;
  }

  int major() const { return primary_.server_major(); }

 private:
  static void progress(const std::string& what) { std::cerr << "bench_standby: " << what << std::endl; }

  void create_topic(const std::string& topic) {
    test::create_topic(kafka_.bootstrap(), topic, kPartitions, {{"message.timestamp.type", "LogAppendTime"}});
  }

  std::unique_ptr<test::PgoutboxProcess> start_relay(const Side& side, const std::string& phase) {
    const std::string path = fmt::format("{}/pgoutbox-{}.yaml", scratch_, side.name);
    std::ofstream out(path, std::ios::trunc);
    out << fmt::format(
        "postgres:\n  dsn: \"{}\"\n  slot: {}\n  publication: pgoutbox\n  create_slot: false\n"
        "kafka:\n  brokers: \"{}\"\n"
        "tables:\n  - table: public.outbox\n    topic: \"{}.${{aggregatetype}}\"\n"
        "log_format: text\nlog_level: warn\n",
        side.server->dsn(), side.slot, kafka_.bootstrap(), side.topic_prefix);
    out.close();
    return std::make_unique<test::PgoutboxProcess>(binary_, path,
                                                   fmt::format("{}/pgoutbox-{}-{}.log", scratch_, side.name, phase));
  }

  // One relay alone drains the backlog its slot holds; the CPU both servers spend meanwhile.
  void drain(const Side& side, std::int64_t events, Row& row) {
    progress("draining the backlog with pgoutbox on the " + side.name);
    TopicWatch watch(kafka_.bootstrap(), side.topic_prefix + ".Backlog", kPartitions, events);
    const double primary_before = cluster_cpu_seconds(primary_);
    const double standby_before = cluster_cpu_seconds(*standby_);
    const auto started = std::chrono::steady_clock::now();
    auto relay = start_relay(side, "drain");
    const auto done = watch.wait_for(events, 600s, [&] { return relay->running(); });
    const double primary_cpu = cluster_cpu_seconds(primary_) - primary_before;
    const double standby_cpu = cluster_cpu_seconds(*standby_) - standby_before;
    relay->signal(SIGTERM);
    (void)relay->wait_exit(30s);
    row.events = events;
    row.drain = watch.finish(60s);
    if (!done) throw std::runtime_error("pgoutbox on the " + side.name + " did not drain the backlog");
    const double seconds = std::chrono::duration<double>(*done - started).count();
    row.events_per_s = static_cast<double>(events) / seconds;
    row.primary_cpu_per_100k = primary_cpu * 100000.0 / static_cast<double>(events);
    row.standby_cpu_per_100k = standby_cpu * 100000.0 / static_cast<double>(events);
  }

  std::string binary_;
  std::string scratch_;
  test::PgCluster primary_{{{"shared_buffers", "256MB"}, {"max_wal_size", "8GB"}, {"checkpoint_timeout", "30min"}}};
  std::unique_ptr<test::PgCluster> standby_;
  test::KafkaBroker kafka_;
  std::vector<Side> sides_;
};

std::string to_table(const std::vector<Row>& rows, const std::string& command, double rate, int major) {
  std::string out = fmt::format("Command: `{}` — {}, Postgres {}.\n\n", command, describe_machine(), major);
  out += fmt::format(
      "| pgoutbox reads from | backlog events | events/s | of on-primary | primary CPU s / 100k events | standby CPU "
      "s / 100k events | lost | duplicates | p50 ms at {0:.0f}/s | p99 ms at {0:.0f}/s | max ms | lost (latency) |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n",
      rate);
  const double base = rows.empty() ? 0 : rows.front().events_per_s;
  for (const auto& r : rows) {
    out += fmt::format("| {} | {} | {:.0f} | {:.0f}% | {:.3f} | {:.3f} | {} | {} | {:.1f} | {:.1f} | {:.1f} | {} |\n",
                       r.source, r.events, r.events_per_s, base > 0 ? 100.0 * r.events_per_s / base : 0,
                       r.primary_cpu_per_100k, r.standby_cpu_per_100k, r.drain.lost(), r.drain.duplicates, r.p50_ms,
                       r.p99_ms, r.max_ms, r.latency.lost());
  }
  if (rows.size() == 2 && rows[0].primary_cpu_per_100k > 0) {
    out += fmt::format(
        "\nOn the standby the primary spends {:.0f}% of the CPU it spends when pgoutbox reads from it, at {:.0f}% of "
        "the throughput; p99 {:.1f}× the primary's.\n",
        100.0 * rows[1].primary_cpu_per_100k / rows[0].primary_cpu_per_100k,
        100.0 * rows[1].events_per_s / rows[0].events_per_s, rows[0].p99_ms > 0 ? rows[1].p99_ms / rows[0].p99_ms : 0);
  }
  return out;
}

}  // namespace
}  // namespace pgoutbox::bench

int main(int argc, char** argv) {
  using namespace pgoutbox;
  CLI::App app{"pgoutbox on the primary against pgoutbox on a hot standby of the same data"};
  std::int64_t events = 200000;
  double rate = 1000;
  double seconds = 15;
  bool smoke = false;
  std::string readme;
  std::string command = "scripts/bench.sh --standby";
  app.add_option("--events", events, "backlog events (10 per transaction, 200 B payloads)");
  app.add_option("--rate", rate, "events/s committed on the primary for the latency phase");
  app.add_option("--seconds", seconds, "length of the latency phase (0: none)");
  app.add_flag("--smoke", smoke, "tiny sizes: proves the bench runs");
  app.add_option("--readme", readme, "a file whose bench-standby markers receive the table");
  app.add_option("--command", command, "the command named above the table");
  CLI11_PARSE(app, argc, argv);
  if (smoke) {
    events = 2000;
    seconds = 2;
  }
  // Decoding on a standby needs Postgres 16+: the project's npm server binaries, 17 unless told.
  ::setenv("PGOUTBOX_TEST_PG_MAJOR", "17", 0);
  try {
    test::ScratchDir scratch("bench-standby", std::nullopt);
    bench::StandbyBench b(PGOUTBOX_BINARY, scratch.path());
    const auto rows = b.run(events, rate, seconds);
    const auto table = bench::to_table(rows, command, rate, b.major());
    std::cout << table;
    if (!readme.empty()) {
      bench::write_between_markers(readme, table, "<!-- bench-standby:begin -->", "<!-- bench-standby:end -->");
    }
    for (const auto& r : rows) {
      if (r.drain.lost() != 0 || r.latency.lost() != 0) {
        std::cerr << "bench_standby: events lost reading from the " << r.source << "\n";
        return 1;
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "bench_standby: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
