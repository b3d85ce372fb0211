// Replication stream + pgoutput decoder throughput against its ceiling: pg_recvlogical
// reading the same WAL to /dev/null, in the same run, on the same server.
//
//   build/release/bench/bench_stream_throughput [--rows N] [--payload BYTES] [--rounds R]
//
// Two slots are created at the same position before N outbox inserts (in transactions of 100
// rows), so both contenders decode exactly the same WAL. Each reads from its slot to the last
// commit. The table printed is Markdown.
#include <sys/wait.h>
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "pg_cluster.h"
#include "pg_recvlogical.h"
#include "pgoutbox/pgoutput/decoder.h"
#include "pgoutbox/pgoutput/relation_cache.h"
#include "pgoutbox/replication/connection.h"
#include "pgoutbox/replication/stream.h"

namespace {

using namespace pgoutbox;
using Clock = std::chrono::steady_clock;

// Decodes every message, resolves relations, touches every column value: the work the relay
// does before mapping. Done at the end marker (a non-transactional logical message).
class DecodingHandler : public replication::StreamHandler {
 public:
  void on_data(const replication::XLogData& data) override {
    ++messages;
    bytes += data.payload.size();
    const auto result = pgoutput::decode(data.payload);
    if (!result) {
      ++errors;
      return;
    }
    if (const auto* ins = std::get_if<pgoutput::InsertData>(&result.message())) {
      if (relations_.find(ins->relid) == nullptr) ++errors;
      for (const auto& col : ins->new_tuple.columns) checksum += col.bytes.size();
      ++rows;
    } else if (const auto* rel = std::get_if<pgoutput::RelationData>(&result.message())) {
      relations_.apply(*rel);
    } else if (const auto* msg = std::get_if<pgoutput::MessageData>(&result.message())) {
      if (msg->prefix == "bench-end") done = true;
    }
  }
  std::uint64_t messages = 0, bytes = 0, rows = 0, errors = 0, checksum = 0;
  bool done = false;

 private:
  pgoutput::RelationCache relations_;
};

struct Result {
  double seconds = 0;
  std::uint64_t messages = 0;
  std::uint64_t bytes = 0;
};

Result run_pgoutbox(const test::PgCluster& pg, const std::string& slot) {
  boost::asio::io_context io;
  auto conn = replication::Connection::open(pg.dsn(), true, "bench-pgoutbox");
  replication::StartOptions start;
  start.slot = slot;
  start.publications = {"bench_pub"};
  start.proto_version = conn.max_proto_version();
  DecodingHandler handler;
  const auto t0 = Clock::now();
  conn.start_replication(start);
  replication::Stream stream(io, conn, handler);
  bool ended = false;
  stream.start([&](const replication::StreamEnd&) { ended = true; });
  while (!handler.done && !ended) io.run_one();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  stream.stop();
  while (!ended) io.run_one();
  if (handler.errors != 0) throw std::runtime_error(fmt::format("{} decode errors", handler.errors));
  return {seconds, handler.messages, handler.bytes};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pgoutbox stream + decoder throughput beside pg_recvlogical on the same WAL"};
  int rows = 1'000'000;
  int payload = 200;
  int rounds = 2;
  app.add_option("--rows", rows, "outbox inserts in the WAL");
  app.add_option("--payload", payload, "payload bytes per event");
  app.add_option("--rounds", rounds, "measurements per contender (alternating; the best is reported)");
  CLI11_PARSE(app, argc, argv);

  test::PgCluster pg({{"shared_buffers", "256MB"}, {"max_wal_size", "4GB"}, {"checkpoint_timeout", "30min"}});
  pg.exec(
      "CREATE TABLE bench_outbox (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text NOT NULL, "
      "aggregateid text NOT NULL, type text NOT NULL, payload jsonb NOT NULL, created_at timestamptz DEFAULT now());"
      "CREATE PUBLICATION bench_pub FOR TABLE bench_outbox WITH (publish = 'insert')");
  const int proto = 3;
  for (int r = 0; r < rounds; ++r) {
    pg.exec(
        fmt::format("SELECT pg_create_logical_replication_slot('ours_{0}', 'pgoutput'), "
                    "pg_create_logical_replication_slot('recv_{0}', 'pgoutput')",
                    r));
  }
  std::fprintf(stderr, "writing %d outbox inserts…\n", rows);
  const std::string pad(static_cast<std::size_t>(std::max(payload - 40, 1)), 'x');
  for (int done = 0; done < rows; done += 100'000) {
    pg.exec(fmt::format(
        "DO $$ BEGIN FOR b IN 0..{0} LOOP INSERT INTO bench_outbox (aggregatetype, aggregateid, type, payload) "
        "SELECT 'order', 'order-' || ((b * 100 + g) % 1000), 'OrderCreated', "
        "jsonb_build_object('n', b * 100 + g, 'pad', '{1}') FROM generate_series(1, 100) g; COMMIT; END LOOP; END $$",
        std::min(100'000, rows - done) / 100 - 1, pad));
  }
  // Both readers stop at this marker: pg_recvlogical by --endpos, pgoutbox by its prefix.
  const Lsn end = *Lsn::parse(*pg.query_value("SELECT pg_logical_emit_message(false, 'bench-end', '')"));
  const auto wal_bytes = std::stoull(*pg.query_value(
      "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), (SELECT min(restart_lsn) FROM pg_replication_slots))"));

  Result best_ours{1e18, 0, 0};
  Result best_recv{1e18, 0, 0};
  for (int r = 0; r < rounds; ++r) {
    const Result recv{bench::drain_with_pg_recvlogical(pg, fmt::format("recv_{}", r), "bench_pub", end, proto), 0, 0};
    const auto ours = run_pgoutbox(pg, fmt::format("ours_{}", r));
    std::fprintf(stderr, "round %d: pg_recvlogical %.2f s, pgoutbox %.2f s\n", r + 1, recv.seconds, ours.seconds);
    if (recv.seconds < best_recv.seconds) best_recv = recv;
    if (ours.seconds < best_ours.seconds) best_ours = ours;
  }
  best_recv.messages = best_ours.messages;
  best_recv.bytes = best_ours.bytes;
  const auto row = [&](const char* name, const Result& r) {
    std::printf("| %s | %.2f | %.0f | %.1f | %.1f%% |\n", name, r.seconds, r.messages / r.seconds,
                r.bytes / r.seconds / 1e6, 100.0 * best_recv.seconds / r.seconds);
  };
  std::printf(
      "\nWAL: %d outbox inserts (%d-byte payloads, 100 per transaction), %.0f MB of WAL, %llu pgoutput messages\n\n",
      rows, payload, static_cast<double>(wal_bytes) / 1e6, static_cast<unsigned long long>(best_ours.messages));
  std::printf("| reader | seconds | messages/s | MB/s (pgoutput) | of pg_recvlogical |\n|---|---|---|---|---|\n");
  row("pg_recvlogical -f /dev/null", best_recv);
  row("pgoutbox stream + decoder", best_ours);
  return 0;
}
