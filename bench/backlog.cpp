#include "backlog.h"

#include <cstdio>

#include <fmt/format.h>

#include "workload.h"

namespace pgoutbox::bench {
namespace {

std::int64_t wal_position_bytes(const test::PgCluster& pg) {
  return std::stoll(*pg.query_value("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint"));
}

}  // namespace

void progress(const std::string& line) {
  std::fprintf(stderr, "[bench] %s\n", line.c_str());
  std::fflush(stderr);
}

WriterCost write_backlog(const Bench& bench, const BacklogSpec& backlog) {
  const auto wal0 = wal_position_bytes(bench.pg);
  WorkloadSpec spec;
  spec.dsn = bench.pg.dsn();
  spec.outbox_table = backlog.table;
  spec.messages = backlog.messages;
  spec.events_per_txn = backlog.events_per_txn;
  spec.payload_bytes = backlog.payload_bytes;
  spec.keys = backlog.keys;
  spec.events = backlog.events;
  spec.oversized_share = backlog.oversized_share;
  spec.oversized_bytes = backlog.oversized_bytes;
  // One transaction is one statement on one connection; two connections keep the server busy.
  spec.connections = backlog.events > backlog.events_per_txn ? 2 : 1;
  spec.synchronous_commit = false;
  const auto written = run_workload(spec);
  // A synchronous commit flushes the WAL, so walsenders can hand out all of it.
  bench.pg.exec("SELECT txid_current()");
  progress(fmt::format("  wrote {} events into {} in {:.1f} s ({:.0f}/s)", backlog.events,
                       backlog.messages ? "logical decoding messages" : backlog.table, written.seconds,
                       static_cast<double>(backlog.events) / written.seconds));
  const auto events = static_cast<double>(backlog.events);
  return {static_cast<double>(wal_position_bytes(bench.pg) - wal0) / events, written.backend_cpu_s / events};
}

Lsn end_of_backlog(const Bench& bench) {
  const Lsn end = *Lsn::parse(*bench.pg.query_value("SELECT pg_logical_emit_message(false, 'bench-end', '')"));
  bench.pg.exec("SELECT txid_current()");
  return end;
}

}  // namespace pgoutbox::bench
