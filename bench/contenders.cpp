#include "contenders.h"

#include <sys/wait.h>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "cpu_meter.h"
#include "pg_recvlogical.h"
#include "stage_probe.h"
#include "topic_watch.h"

namespace pgoutbox::bench {
namespace {

// Signed checkpoints, as a deployment runs them (docs/spec.md I11; exactly-once needs one): the
// key's file, named to pgoutbox by PGOUTBOX_CHECKPOINT_SIGNING_KEY_FILE rather than in the
// configuration file, so that a baseline from before signed checkpoints (--baseline-pgoutbox),
// which ignores the variable, reads the same file.
std::string write_signing_key(const Bench& bench) {
  const std::string key_path = fmt::format("{}/checkpoint.key", bench.scratch);
  {
    std::ofstream key(key_path, std::ios::trunc);
    key << "bench-signing-key-0123456789abcdef0123456789abcdef\n";
  }
  std::filesystem::permissions(key_path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  return key_path;
}

std::string write_pgoutbox_config(const Bench& bench, Contender kind, const std::string& topic, const std::string& slot,
                                  const std::string& dead_letter_topic, int metrics_port) {
  const std::string path = fmt::format("{}/pgoutbox-{}.yaml", bench.scratch, slot);
  std::ofstream out(path, std::ios::trunc);
  // Only what the run needs; everything else is pgoutbox's default. The message outbox has no
  // table: its events are the workload's logical decoding messages with prefix "outbox".
  const std::string source = kind == Contender::pgoutbox_messages
                                 ? fmt::format("messages:\n  - prefix: outbox\n    topic: \"{}\"\n", topic)
                                 : fmt::format("tables:\n  - table: public.outbox\n    topic: \"{}\"\n", topic);
  std::string kafka_settings;
  for (const auto& setting : bench.kafka_settings) kafka_settings += "  " + setting + "\n";
  const std::string poison =
      dead_letter_topic.empty()
          ? ""
          : fmt::format("poison:\n  policy: dead-letter\n  dead_letter_topic: \"{}\"\n", dead_letter_topic);
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
      "{}"
      "{}"
      "delivery: {}\n"
      "log_format: text\n"
      "log_level: warn\n"
      "metrics_address: \"127.0.0.1:{}\"\n",
      bench.dsn_as(kPgoutboxRole), slot, kPublication, kPgoutboxRole, bench.kafka.bootstrap(), kafka_settings, source,
      poison, kind == Contender::pgoutbox_exactly_once ? "exactly-once" : "at-least-once", metrics_port);
  if (!out) throw std::runtime_error("cannot write " + path);
  return path;
}

std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
  return path;
}

// Kafka Connect standalone as its quickstart runs it, with what the comparison needs: the
// converters that pass the key and the payload through as they are (pgoutbox's bytes), the
// producer's delivery guarantees and batching set like pgoutbox's (acks=all, idempotence,
// linger 5 ms, lz4), file offsets, and the class-path plugins found through their service
// manifests instead of a scan of every jar. The REST listener takes a free port.
std::vector<std::string> debezium_argv(const Bench& bench, Contender kind, const std::string& topic,
                                       const std::string& slot) {
  const bool tuned = kind == Contender::debezium_tuned;
  const std::string base = fmt::format("{}/debezium-{}", bench.scratch, slot);
  const auto worker = write_file(base + "-worker.properties",
                                 fmt::format("bootstrap.servers={}\n"
                                             "key.converter=org.apache.kafka.connect.storage.StringConverter\n"
                                             "value.converter=org.apache.kafka.connect.storage.StringConverter\n"
                                             "offset.storage.file.filename={}.offsets\n"
                                             "offset.flush.interval.ms={}\n"
                                             "plugin.discovery=service_load\n"
                                             "listeners=http://127.0.0.1:0\n"
                                             "producer.acks=all\n"
                                             "producer.enable.idempotence=true\n"
                                             "producer.linger.ms=5\n"
                                             "producer.compression.type=lz4\n",
                                             bench.kafka.bootstrap(), base, tuned ? 1000 : 60000));
  // The connector at its defaults but for what the outbox needs; the tuned one with the
  // settings that matter at low rates (poll.interval.ms, default 500) and in a backlog (batch
  // and queue sizes, defaults 2048 and 8192).
  std::string connector = fmt::format(
      "name=bench-{}\n"
      "connector.class=io.debezium.connector.postgresql.PostgresConnector\n"
      "tasks.max=1\n"
      "database.hostname=127.0.0.1\n"
      "database.port={}\n"
      "database.user={}\n"
      "database.dbname=postgres\n"
      "topic.prefix=bench\n"
      "plugin.name=pgoutput\n"
      "slot.name={}\n"
      "publication.name={}\n"
      "publication.autocreate.mode=disabled\n"
      "snapshot.mode=no_data\n"
      "table.include.list=public.outbox\n"
      "transforms=outbox\n"
      "transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n"
      "transforms.outbox.route.by.field=aggregatetype\n"
      "transforms.outbox.table.field.event.key=aggregateid\n"
      "transforms.outbox.route.topic.replacement={}\n",
      slot, bench.pg.port(), kDebeziumRole, slot, kPublication, topic);
  if (tuned) connector += "max.batch.size=20480\nmax.queue.size=81920\npoll.interval.ms=10\n";
  const auto connector_path = write_file(base + "-connector.properties", connector);
  const auto log4j = write_file(base + "-log4j2.properties",
                                "rootLogger.level=warn\nrootLogger.appenderRef.out.ref=out\n"
                                "appender.out.type=Console\nappender.out.name=out\n"
                                "appender.out.layout.type=PatternLayout\n"
                                "appender.out.layout.pattern=%d %p %c{1}: %m%n\n");
  // The JVM flags connect-standalone.sh and kafka-run-class.sh give it.
  return {bench.java,
          "-Xms256M",
          "-Xmx2G",
          "-XX:+UseG1GC",
          "-XX:MaxGCPauseMillis=20",
          "-XX:InitiatingHeapOccupancyPercent=35",
          "-XX:+ExplicitGCInvokesConcurrent",
          "-Djava.awt.headless=true",
          "-Dlog4j2.configurationFile=" + log4j,
          "-Djava.io.tmpdir=" + bench.scratch,
          "-cp",
          bench.debezium_libs + "/*",
          "org.apache.kafka.connect.cli.ConnectStandalone",
          worker,
          connector_path};
}

test::ChildProcess spawn_relay(const Bench& bench, Contender kind, const std::string& topic, const std::string& slot,
                               const std::string& dead_letter_topic, const std::string& log_path, int metrics_port) {
  std::vector<std::string> argv, env;
  if (is_pgoutbox(kind)) {
    argv = {bench.pgoutbox_bin, "run", "-c",
            write_pgoutbox_config(bench, kind, topic, slot, dead_letter_topic, metrics_port)};
    env = {"PGOUTBOX_CHECKPOINT_SIGNING_KEY_FILE=" + write_signing_key(bench)};
    env.insert(env.end(), bench.pgoutbox_env.begin(), bench.pgoutbox_env.end());
  } else if (is_debezium(kind)) {
    argv = debezium_argv(bench, kind, topic, slot);
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
  return test::ChildProcess({.argv = argv, .log_path = log_path, .run_as = std::nullopt, .extra_env = env});
}

}  // namespace

std::string Bench::dsn_as(const std::string& role) const {
  return fmt::format("host=127.0.0.1 port={} dbname=postgres user={}", pg.port(), role);
}

std::string Bench::tag(Contender c) const { return std::string(tag_of(c)) + (build.empty() ? "" : "_base"); }

std::string label_of(Contender c, const std::string& build) {
  return build.empty() ? name_of(c) : fmt::format("{} ({})", name_of(c), build);
}

const char* name_of(Contender c) {
  switch (c) {
    case Contender::pgoutbox:
      return "pgoutbox";
    case Contender::pgoutbox_exactly_once:
      return "pgoutbox exactly-once";
    case Contender::debezium:
      return "Debezium";
    case Contender::debezium_tuned:
      return "Debezium tuned";
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
    case Contender::debezium:
      return "debezium";
    case Contender::debezium_tuned:
      return "debezium_tuned";
    case Contender::polling:
      return "polling";
    case Contender::recvlogical:
      return "recv";
    case Contender::pgoutbox_messages:
      return "pgoutbox_msg";
  }
  return "?";
}

const char* role_of(Contender c) {
  if (is_pgoutbox(c)) return kPgoutboxRole;
  if (is_debezium(c)) return kDebeziumRole;
  return c == Contender::polling ? kPollingRole : kRecvlogicalRole;
}

void check_delivery(Contender kind, const std::string& topic, const Delivery& d) {
  if (d.lost() != 0 || d.foreign != 0 || (kind == Contender::pgoutbox_exactly_once && d.duplicates != 0)) {
    throw std::runtime_error(fmt::format("{} in {}: {} of {} events lost, {} duplicates, {} foreign records",
                                         name_of(kind), topic, d.lost(), d.expected, d.duplicates, d.foreign));
  }
}

RelayProcess::RelayProcess(const Bench& bench, Contender kind, const std::string& topic, const std::string& slot,
                           const std::string& dead_letter_topic)
    : log_path_(fmt::format("{}/{}-{}.log", bench.scratch, bench.tag(kind), topic)),
      java_(is_debezium(kind)),
      metrics_port_(is_pgoutbox(kind) ? test::free_loopback_port() : 0),
      child_(spawn_relay(bench, kind, topic, slot, dead_letter_topic, log_path_, metrics_port_)) {}

ProcessCost RelayProcess::finish() {
  ProcessCost cost{process_cpu_seconds(child_.pid()), peak_rss_kib(child_.pid())};
  child_.signal_leader(SIGTERM);
  const auto status = child_.wait(std::chrono::seconds(60));
  // A JVM that ran its shutdown hooks on SIGTERM exits with 128 + 15.
  const auto clean = [&](int code) { return code == 0 || (java_ && code == 128 + SIGTERM); };
  if (!status || !WIFEXITED(*status) || !clean(WEXITSTATUS(*status))) {
    throw std::runtime_error(fmt::format("{} did not stop cleanly:\n{}", log_path_, test::tail_of(log_path_)));
  }
  return cost;
}

void create_bench_topic(const Bench& bench, const std::string& topic,
                        const std::map<std::string, std::string>& config) {
  auto all = config;
  all.emplace("message.timestamp.type", "LogAppendTime");
  test::create_topic(bench.kafka.bootstrap(), topic, kPartitions, all);
}

DrainResult drain(const Bench& bench, Contender kind, const std::string& slot, Lsn end, const std::string& topic,
                  std::int64_t events, const DrainTarget& target) {
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
  create_bench_topic(bench, topic, target.topic_config);
  const Belongs in_topic =
      target.dead_letter ? Belongs([dead = target.dead_letter](std::int64_t seq) { return !dead(seq); }) : Belongs{};
  TopicWatch watch(bench.kafka.bootstrap(), topic, kPartitions, events, in_topic);
  std::optional<TopicWatch> dead_letters;
  if (!target.dead_letter_topic.empty()) {
    create_bench_topic(bench, target.dead_letter_topic);
    dead_letters.emplace(bench.kafka.bootstrap(), target.dead_letter_topic, kPartitions, events,
                         target.dead_letter ? target.dead_letter : Belongs([](std::int64_t) { return false; }));
  }
  DbProbe probe(bench.pg, role_of(kind), table_of(kind));
  probe.begin();
  const double broker_cpu0 = process_cpu_seconds(bench.kafka.pid());
  const auto t0 = std::chrono::steady_clock::now();
  RelayProcess relay(bench, kind, topic, slot, target.dead_letter_topic);
  const auto running = [&] { return relay.running(); };
  const auto first = watch.wait_for(1, std::chrono::minutes(10), running);
  result.first_events = watch.distinct();
  auto done = first ? watch.wait_for(watch.expected(), std::chrono::minutes(10), running) : std::nullopt;
  // Every event is visible when the last of both topics' is.
  if (done && dead_letters) {
    const auto dead_done = dead_letters->wait_for(dead_letters->expected(), std::chrono::minutes(10), running);
    done = dead_done ? std::optional(std::max(*done, *dead_done)) : std::nullopt;
  }
  if (!done) {
    throw std::runtime_error(fmt::format(
        "{} did not deliver {} events ({} of {} in {}, {} of {} in {}):\n{}", label_of(kind, bench.build), events,
        watch.distinct(), watch.expected(), topic, dead_letters ? dead_letters->distinct() : 0,
        dead_letters ? dead_letters->expected() : 0, target.dead_letter_topic, test::tail_of(relay.log_path())));
  }
  result.seconds = std::chrono::duration<double>(*done - t0).count();
  result.first_seconds = std::chrono::duration<double>(*first - t0).count();
  result.broker_cpu_s = process_cpu_seconds(bench.kafka.pid()) - broker_cpu0;
  probe.stop_sampling();
  if (is_pgoutbox(kind)) result.sessions = metric_value(relay.metrics_port(), "pgoutbox_sessions_started_total");
  result.process = relay.finish();
  result.db = probe.end();
  result.delivery = watch.finish(std::chrono::minutes(2));
  check_delivery(kind, topic, result.delivery);
  if (dead_letters) {
    result.dead_letters = dead_letters->finish(std::chrono::minutes(2));
    check_delivery(kind, target.dead_letter_topic, result.dead_letters);
  }
  return result;
}

}  // namespace pgoutbox::bench
