#pragma once

// The contenders, run the same way: pgoutbox (the real `pgoutbox run -c FILE` binary) in each
// delivery mode (at-least-once, its default, and `delivery: exactly-once`) and over a table-less
// outbox of logical decoding messages, Debezium's outbox router as users run it (Kafka Connect
// standalone, the Postgres connector and the EventRouter, at its defaults and tuned), the
// polling relay (bench_polling_relay) and pg_recvlogical -f /dev/null (the ceiling). Each
// connects as its own role (the pgoutbox modes as one, both Debezium settings as another, never
// at the same time), so Postgres's statistics tell their
// costs apart.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "child_process.h"
#include "db_probe.h"
#include "kafka_broker.h"
#include "pg_cluster.h"
#include "pgoutbox/lsn.h"
#include "topic_watch.h"

namespace pgoutbox::bench {

inline constexpr const char* kPgoutboxRole = "bench_pgoutbox";
inline constexpr const char* kPollingRole = "bench_polling";
inline constexpr const char* kRecvlogicalRole = "bench_recvlogical";
inline constexpr const char* kDebeziumRole = "bench_debezium";
inline constexpr const char* kPublication = "pgoutbox";  // sql/publication.sql
inline constexpr int kPartitions = 6;

// pgoutbox_messages: pgoutbox (at-least-once) relaying a table-less outbox, the workload's events
// written as pg_logical_emit_message(true, 'outbox', envelope) instead of outbox rows.
enum class Contender {
  pgoutbox,
  pgoutbox_exactly_once,
  pgoutbox_messages,
  debezium,
  debezium_tuned,
  polling,
  recvlogical
};
const char* name_of(Contender c);
// For slot, topic and file names: pgoutbox, pgoutbox_eos, pgoutbox_msg, debezium, debezium_tuned,
// polling, recv.
const char* tag_of(Contender c);
// name_of(c), and "(<build>)" after it for a baseline's run (Bench::build): "pgoutbox (baseline 284c752)".
std::string label_of(Contender c, const std::string& build);

struct PollingTuning {
  int batch = 10000;
  int workers = 2;
  int poll_interval_ms = 5;
  std::string mark = "delete";
};

struct Bench {
  const test::PgCluster& pg;
  const test::KafkaBroker& kafka;
  std::string pgoutbox_bin;
  std::string polling_bin;
  std::string scratch;  // logs and configuration files
  PollingTuning polling;
  std::string java;           // the JVM that runs Kafka Connect
  std::string debezium_libs;  // Connect, the connector and its transform (third_party/debezium/pom.xml)
  // Empty for this build. "baseline <commit>" when pgoutbox_bin is the baseline's (a pgoutbox
  // built from another commit, --baseline-pgoutbox): its pgoutbox contenders run beside this
  // build's, in the same run, under this label and with their own slots and topics.
  std::string build;
  // More keys of pgoutbox's `kafka:` section for this build's runs, one `key: value` per line
  // (--kafka-setting): an A/B of a setting in one run, the baseline being the same binary.
  std::vector<std::string> kafka_settings;
  // More NAME=value variables for pgoutbox's processes (its configuration's overrides, e.g.
  // PGOUTBOX_TABLES_0_FORMAT_TYPE for bench/formats.h).
  std::vector<std::string> pgoutbox_env;

  std::string dsn_as(const std::string& role) const;
  // tag_of(c), with "_base" after it for the baseline: slot, topic and file names.
  std::string tag(Contender c) const;
};

inline bool is_pgoutbox(Contender c) {
  return c == Contender::pgoutbox || c == Contender::pgoutbox_exactly_once || c == Contender::pgoutbox_messages;
}
inline bool is_debezium(Contender c) { return c == Contender::debezium || c == Contender::debezium_tuned; }
// The relays that stream from a slot (made by the harness before the backlog) rather than poll.
inline bool uses_slot(Contender c) { return is_pgoutbox(c) || is_debezium(c); }
// The role the contender connects as, and the table it reads.
const char* role_of(Contender c);
inline const char* table_of(Contender c) { return c == Contender::polling ? "outbox_polled" : "outbox"; }

struct ProcessCost {
  double cpu_s = 0;
  long peak_rss_kib = 0;
};

// A relay (pgoutbox, Debezium or the polling relay) running as a child process until finish().
class RelayProcess {
 public:
  // `slot` is pgoutbox's (ignored by the polling relay), created beforehand. With a
  // `dead_letter_topic`, pgoutbox runs with poison.policy dead-letter into it.
  RelayProcess(const Bench& bench, Contender kind, const std::string& topic, const std::string& slot,
               const std::string& dead_letter_topic = "");
  bool running() { return child_.running(); }
  pid_t pid() const { return child_.pid(); }
  // CPU and peak RSS as they are now, then SIGTERM and wait for a clean exit.
  ProcessCost finish();
  const std::string& log_path() const { return log_path_; }
  // pgoutbox's /metrics on 127.0.0.1 (its stage histograms, stage_probe.h); 0 for the others.
  int metrics_port() const { return metrics_port_; }

 private:
  std::string log_path_;
  bool java_;
  int metrics_port_;
  test::ChildProcess child_;
};

struct DrainResult {
  double seconds = 0;  // from the contender's start to its last event acknowledged (or read)
  // Relays: from the start to the first event visible, and how many were visible then; the
  // rate after it leaves the start-up (a JVM's, a connection's) out.
  double first_seconds = 0;
  std::int64_t first_events = 0;
  DbCost db;
  ProcessCost process;      // pgoutbox's or the polling relay's own
  double broker_cpu_s = 0;  // the Kafka broker's CPU over the drain
  Delivery delivery;        // what a read_committed consumer saw (relays only)
  Delivery dead_letters;    // the same in the dead-letter topic (DrainTarget), when there is one
  // pgoutbox's pgoutbox_sessions_started_total when the drain ended: 1 when no session restarted.
  std::optional<double> sessions;
};

// Where a drain's events go when not all into one topic at the broker's defaults: the topic's
// own configuration (beside LogAppendTime), and a dead-letter topic pgoutbox's poison.policy
// dead-letter writes to, which is to hold the events `dead_letter` holds true for and the topic
// the others.
struct DrainTarget {
  std::map<std::string, std::string> topic_config;
  std::string dead_letter_topic;  // empty: pgoutbox's default poison.policy
  Belongs dead_letter;            // empty: none of the events
};

// Events/s after the first event was visible: the start-up (a JVM's, a connection's) left out.
// 0 when every event became visible at once (one Kafka transaction), where there is no rate
// after it.
inline double rate_after_first(const DrainResult& r, std::int64_t events) {
  const double seconds = r.seconds - r.first_seconds;
  return seconds > 0 && r.first_events < events ? static_cast<double>(events - r.first_events) / seconds : 0;
}

// Creates the topic the relay writes to: kPartitions partitions, LogAppendTime timestamps, and
// `config` beside them.
void create_bench_topic(const Bench& bench, const std::string& topic,
                        const std::map<std::string, std::string>& config = {});

// Throws naming the counts when `kind` lost an event or wrote a foreign record, or when
// exactly-once delivered an event twice (at-least-once may; its duplicates are reported).
void check_delivery(Contender kind, const std::string& topic, const Delivery& delivery);

// Drains a backlog of `events` already committed: for pg_recvlogical from `slot` up to `end`,
// for the relays until a read_committed consumer has seen every event in `topic`. Throws when a
// relay lost an event, or when exactly-once delivered one twice; the same for the dead-letter
// topic of a `target` that names one.
DrainResult drain(const Bench& bench, Contender kind, const std::string& slot, Lsn end, const std::string& topic,
                  std::int64_t events, const DrainTarget& target = {});

}  // namespace pgoutbox::bench
