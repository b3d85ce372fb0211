#pragma once

// What a contender costs the business database over one run, from Postgres's own accounting:
//   - CPU seconds of the contender's backends (walsender or SQL sessions), read from
//     /proc/PID/stat of every backend pg_stat_activity lists for the contender's role, sampled
//     while they live (each is new with the contender, so its total is the run's);
//   - statements it executed: pg_stat_statements calls by its role, all of them and those that
//     name an outbox table;
//   - WAL written meanwhile: pg_current_wal_lsn() before and after (nothing else writes);
//   - dead tuples left in its outbox table: growth of pg_stat_user_tables.n_dead_tup
//     (autovacuum is off on the outbox tables, so this is what vacuum must clean later).

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "pg_cluster.h"

namespace pgoutbox::bench {

struct DbCost {
  double backend_cpu_s = 0;
  std::int64_t statements = 0;
  std::int64_t outbox_statements = 0;
  std::int64_t wal_bytes = 0;
  std::int64_t dead_tuples = 0;
};

class DbProbe {
 public:
  DbProbe(const test::PgCluster& pg, std::string role, std::string table);
  ~DbProbe();
  DbProbe(const DbProbe&) = delete;
  DbProbe& operator=(const DbProbe&) = delete;

  // Before the contender starts.
  void begin();
  // While the contender still runs: takes the last CPU sample and stops sampling.
  void stop_sampling();
  // After the contender has stopped and its sessions are gone.
  DbCost end();

 private:
  void sample(PGconn* conn);
  const test::PgCluster& pg_;
  std::string role_;
  std::string table_;
  std::string wal_start_;
  std::int64_t dead_start_ = 0;
  std::atomic<bool> sampling_{false};
  std::thread sampler_;
  std::mutex mutex_;
  std::map<pid_t, double> cpu_by_pid_;
};

}  // namespace pgoutbox::bench
