#include "contenders.h"

#include <sys/wait.h>
#include <csignal>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "cpu_meter.h"
#include "pg_recvlogical.h"
#include "topic_watch.h"

namespace pgoutbox::bench {
namespace {

std::string write_pgoutbox_config(const Bench& bench, Contender kind, const std::string& topic,
                                  const std::string& slot) {
  const std::string path = fmt::format("{}/pgoutbox-{}.yaml", bench.scratch, slot);
  std::ofstream out(path, std::ios::trunc);
  // Only what the run needs; everything else is pgoutbox's default. The message outbox has no
  // table: its events are the workload's logical decoding messages with prefix "outbox".
  const std::string source = kind == Contender::pgoutbox_messages
                                 ? fmt::format("messages:\n  - prefix: outbox\n    topic: \"{}\"\n", topic)
                                 : fmt::format("tables:\n  - table: public.outbox\n    topic: \"{}\"\n", topic);
  out << fmt::format(
      "postgres:\n"
      "  dsn: \"{}\"\n"
      "  slot: {}\n"
      "  publication: {}\n"
      "  create_slot: false\n"
      "  application_name: {}\n"
      "kafka:\n"
      "  brokers: \"{}\"\n"
      "{}"
      "delivery: {}\n"
      "log_format: text\n"
      "log_level: warn\n",
      bench.dsn_as(kPgoutboxRole), slot, kPublication, kPgoutboxRole, bench.kafka.bootstrap(), source,
      kind == Contender::pgoutbox_exactly_once ? "exactly-once" : "at-least-once");
  if (!out) throw std::runtime_error("cannot write " + path);
  return path;
}

test::ChildProcess spawn_relay(const Bench& bench, Contender kind, const std::string& topic, const std::string& slot,
                               const std::string& log_path) {
  std::vector<std::string> argv;
  if (is_pgoutbox(kind)) {
    argv = {bench.pgoutbox_bin, "run", "-c", write_pgoutbox_config(bench, kind, topic, slot)};
  } else if (kind == Contender::polling) {
    const auto& t = bench.polling;
    argv = {bench.polling_bin,
            "--dsn",
            bench.dsn_as(kPollingRole),
            "--brokers",
            bench.kafka.bootstrap(),
            "--topic",
            topic,
            "--batch",
            std::to_string(t.batch),
            "--workers",
            std::to_string(t.workers),
            "--poll-interval-ms",
            std::to_string(t.poll_interval_ms),
            "--mark",
            t.mark};
  } else {
    throw std::logic_error("pg_recvlogical is not a relay");
  }
  return test::ChildProcess({.argv = argv, .log_path = log_path, .run_as = std::nullopt, .extra_env = {}});
}

}  // namespace

std::string Bench::dsn_as(const std::string& role) const {
  return fmt::format("host=127.0.0.1 port={} dbname=postgres user={}", pg.port(), role);
}

const char* name_of(Contender c) {
  switch (c) {
    case Contender::pgoutbox:
      return "pgoutbox";
    case Contender::pgoutbox_exactly_once:
      return "pgoutbox exactly-once";
    case Contender::polling:
      return "polling relay";
    case Contender::recvlogical:
      return "pg_recvlogical";
    case Contender::pgoutbox_messages:
      return "pgoutbox messages";
  }
  return "?";
}

const char* tag_of(Contender c) {
  switch (c) {
    case Contender::pgoutbox:
      return "pgoutbox";
    case Contender::pgoutbox_exactly_once:
      return "pgoutbox_eos";
    case Contender::polling:
      return "polling";
    case Contender::recvlogical:
      return "recv";
    case Contender::pgoutbox_messages:
      return "pgoutbox_msg";
  }
  return "?";
}

void check_delivery(Contender kind, const std::string& topic, const Delivery& d) {
  if (d.lost() != 0 || d.foreign != 0 || (kind == Contender::pgoutbox_exactly_once && d.duplicates != 0)) {
    throw std::runtime_error(fmt::format("{} in {}: {} of {} events lost, {} duplicates, {} foreign records",
                                         name_of(kind), topic, d.lost(), d.expected, d.duplicates, d.foreign));
  }
}

RelayProcess::RelayProcess(const Bench& bench, Contender kind, const std::string& topic, const std::string& slot)
    : log_path_(fmt::format("{}/{}-{}.log", bench.scratch, tag_of(kind), topic)),
      child_(spawn_relay(bench, kind, topic, slot, log_path_)) {}

ProcessCost RelayProcess::finish() {
  ProcessCost cost{process_cpu_seconds(child_.pid()), peak_rss_kib(child_.pid())};
  child_.signal_leader(SIGTERM);
  const auto status = child_.wait(std::chrono::seconds(60));
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    throw std::runtime_error(fmt::format("{} did not stop cleanly:\n{}", log_path_, test::tail_of(log_path_)));
  }
  return cost;
}

void create_bench_topic(const Bench& bench, const std::string& topic) {
  test::create_topic(bench.kafka.bootstrap(), topic, kPartitions, {{"message.timestamp.type", "LogAppendTime"}});
}

DrainResult drain(const Bench& bench, Contender kind, const std::string& slot, Lsn end, const std::string& topic,
                  std::int64_t events) {
  DrainResult result;
  if (kind == Contender::recvlogical) {
    DbProbe probe(bench.pg, kRecvlogicalRole, "outbox");
    probe.begin();
    // The walsender exits with pg_recvlogical; its CPU is sampled while it lives. The client's
    // own CPU is what the reaped child adds to this process's children's usage.
    const double children0 = children_cpu_seconds();
    result.seconds = drain_with_pg_recvlogical(bench.dsn_as(kRecvlogicalRole), slot, kPublication, end, 3);
    result.process.cpu_s = children_cpu_seconds() - children0;
    result.db = probe.end();
    return result;
  }
  create_bench_topic(bench, topic);
  TopicWatch watch(bench.kafka.bootstrap(), topic, kPartitions, events);
  DbProbe probe(bench.pg, is_pgoutbox(kind) ? kPgoutboxRole : kPollingRole,
                is_pgoutbox(kind) ? "outbox" : "outbox_polled");
  probe.begin();
  const double broker_cpu0 = process_cpu_seconds(bench.kafka.pid());
  const auto t0 = std::chrono::steady_clock::now();
  RelayProcess relay(bench, kind, topic, slot);
  const auto done = watch.wait_for(events, std::chrono::minutes(10), [&] { return relay.running(); });
  if (!done) {
    throw std::runtime_error(fmt::format("{} did not deliver {} events ({} in {}):\n{}", name_of(kind), events,
                                         watch.distinct(), topic, test::tail_of(relay.log_path())));
  }
  result.seconds = std::chrono::duration<double>(*done - t0).count();
  result.broker_cpu_s = process_cpu_seconds(bench.kafka.pid()) - broker_cpu0;
  probe.stop_sampling();
  result.process = relay.finish();
  result.db = probe.end();
  result.delivery = watch.finish(std::chrono::minutes(2));
  check_delivery(kind, topic, result.delivery);
  return result;
}

}  // namespace pgoutbox::bench
