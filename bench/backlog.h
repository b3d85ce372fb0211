#pragma once

// A committed backlog for a drain: the workload written flat out (asynchronous commit: a bulk
// of history, not a latency test), with what writing it cost the database.

#include <cstdint>
#include <string>

#include "contenders.h"
#include "pgoutbox/lsn.h"

namespace pgoutbox::bench {

struct BacklogSpec {
  int events_per_txn = 10;
  int payload_bytes = 200;
  std::int64_t events = 0;
  int keys = 1000;               // distinct aggregate ids
  std::string table = "outbox";  // or the polling relay's outbox_polled
  bool messages = false;         // logical decoding messages instead of rows
  double oversized_share = 0;    // WorkloadSpec::oversized_share: transactions with one oversized row
  int oversized_bytes = 24 * 1024;
};

// Per event: the WAL the writes produced and their backends' CPU.
struct WriterCost {
  double wal_per_event = 0;
  double backend_cpu_s_per_event = 0;
};

WriterCost write_backlog(const Bench& bench, const BacklogSpec& spec);

// A non-transactional message written after the backlog: pg_recvlogical reads up to its LSN.
Lsn end_of_backlog(const Bench& bench);

// "[bench] line" on stderr: the run's progress.
void progress(const std::string& line);

}  // namespace pgoutbox::bench
