#pragma once

// The contenders, run the same way: pgoutbox (the real `pgoutbox run -c FILE` binary) in each
// delivery mode (at-least-once, its default, and `delivery: exactly-once`) and over a table-less
// outbox of logical decoding messages, the polling relay
// (bench_polling_relay) and pg_recvlogical -f /dev/null (the ceiling). Each connects as its own
// role (both pgoutbox modes as one, never at the same time), so Postgres's statistics tell their
// costs apart.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

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
inline constexpr const char* kPublication = "pgoutbox";  // sql/publication.sql
inline constexpr int kPartitions = 6;

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

  std::string dsn_as(const std::string& role) const;
};

// pgoutbox_messages: pgoutbox (at-least-once) relaying a table-less outbox, the workload's events
// written as pg_logical_emit_message(true, 'outbox', envelope) instead of outbox rows.
enum class Contender { pgoutbox, pgoutbox_exactly_once, polling, recvlogical, pgoutbox_messages };
const char* name_of(Contender c);
// For slot, topic and file names: pgoutbox, pgoutbox_eos, polling, recv, pgoutbox_msg.
const char* tag_of(Contender c);
inline bool is_pgoutbox(Contender c) {
  return c == Contender::pgoutbox || c == Contender::pgoutbox_exactly_once || c == Contender::pgoutbox_messages;
}

struct ProcessCost {
  double cpu_s = 0;
  long peak_rss_kib = 0;
};

// A relay (pgoutbox or the polling relay) running as a child process until finish().
class RelayProcess {
 public:
  // `slot` is pgoutbox's (ignored by the polling relay), created beforehand.
  RelayProcess(const Bench& bench, Contender kind, const std::string& topic, const std::string& slot);
  bool running() { return child_.running(); }
  pid_t pid() const { return child_.pid(); }
  // CPU and peak RSS as they are now, then SIGTERM and wait for a clean exit.
  ProcessCost finish();
  const std::string& log_path() const { return log_path_; }

 private:
  std::string log_path_;
  test::ChildProcess child_;
};

struct DrainResult {
  double seconds = 0;  // from the contender's start to its last event acknowledged (or read)
  DbCost db;
  ProcessCost process;      // pgoutbox's or the polling relay's own
  double broker_cpu_s = 0;  // the Kafka broker's CPU over the drain
  Delivery delivery;        // what a read_committed consumer saw (relays only)
};

// Creates the topic the relay writes to: kPartitions partitions, LogAppendTime timestamps.
void create_bench_topic(const Bench& bench, const std::string& topic);

// Throws naming the counts when `kind` lost an event or wrote a foreign record, or when
// exactly-once delivered an event twice (at-least-once may; its duplicates are reported).
void check_delivery(Contender kind, const std::string& topic, const Delivery& delivery);

// Drains a backlog of `events` already committed: for pg_recvlogical from `slot` up to `end`,
// for the relays until a read_committed consumer has seen every event in `topic`. Throws when a
// relay lost an event, or when exactly-once delivered one twice.
DrainResult drain(const Bench& bench, Contender kind, const std::string& slot, Lsn end, const std::string& topic,
                  std::int64_t events);

}  // namespace pgoutbox::bench
