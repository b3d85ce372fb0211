#pragma once

// The workload generator: an order service writing one business row and its outbox events in
// one transaction, at a target rate or flat out, recording each event's commit time.
//
// Event ids are derived from a sequence number (uuid 00000000-0000-4000-8000-<seq in hex>), so
// whoever reads a record back — its "id" header — finds the event's commit time without a side
// table. Commit times are taken on the client right after COMMIT returns, from CLOCK_REALTIME:
// the clock the broker stamps LogAppendTime with on this same machine.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pgoutbox::bench {

struct WorkloadSpec {
  std::string dsn;
  std::string outbox_table = "outbox";   // public.outbox (Debezium shape) or the polling relay's table
  std::string aggregate_type = "Order";  // the routing value
  int events_per_txn = 10;
  int payload_bytes = 200;  // approximate length of the payload's jsonb text
  int keys = 1000;          // distinct aggregate ids
  std::int64_t first_seq = 0;
  std::int64_t events = 0;
  double events_per_second = 0;  // 0: flat out
  int connections = 1;
  bool synchronous_commit = true;
  // The events as pg_logical_emit_message(true, 'outbox', envelope) (a table-less outbox, the
  // envelope in Debezium's column names) instead of rows of outbox_table.
  bool messages = false;
  // This share of the transactions holds one oversized event (oversized_event() says which):
  // its payload's pad is oversized_bytes of base64 text from random bytes, which no codec
  // compresses below three quarters of its size (a record over a topic's max.message.bytes).
  double oversized_share = 0;
  int oversized_bytes = 24 * 1024;
};

// Whether event `seq` (counted from the workload's first_seq) is an oversized one: the first
// event of every round(1 / share)-th transaction (the last of each such run of transactions).
bool oversized_event(std::int64_t seq, int events_per_txn, double share);

struct WorkloadResult {
  // Microseconds since the epoch at which the transaction holding event first_seq + i committed.
  std::vector<std::int64_t> commit_us;
  double seconds = 0;
  // CPU seconds of the writers' own backends (/proc/PID/stat, read before they disconnect):
  // what writing the events cost the database on the writer's side.
  double backend_cpu_s = 0;
};

// Writes spec.events events (rounded up to whole transactions) and returns their commit times.
// Throws with the server's message when a write fails.
WorkloadResult run_workload(const WorkloadSpec& spec);

std::string event_id(std::int64_t seq);
std::optional<std::int64_t> seq_of_event_id(std::string_view id);

std::int64_t realtime_us();

}  // namespace pgoutbox::bench
