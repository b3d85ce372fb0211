// End-to-end throughput — from a backlog of committed outbox rows to Kafka acknowledgements —
// beside pg_recvlogical reading the same WAL to /dev/null (the ceiling: how fast Postgres can
// hand the changes out at all), in the same run, on the same machine.
//
//   build/release/bench/bench_relay_throughput [--events-1 N] [--events-100 N]
//
// For each transaction size, two slots are created at the same position, the backlog is
// written, and each contender drains its slot: pg_recvlogical up to an end marker, pgoutbox
// until Kafka has acknowledged every event. CPU seconds of the walsender, the broker and
// pgoutbox are read from /proc over pgoutbox's run. Prints a Markdown table.
#include <CLI/CLI.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <cstdio>
#include <sys/wait.h>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "pg_recvlogical.h"
#include "cpu_meter.h"
#include "kafka_broker.h"
#include "kafka_client.h"
#include "pg_cluster.h"
#include "pgoutbox/relay/relay.h"

namespace {

using namespace pgoutbox;
using Clock = std::chrono::steady_clock;

struct Row {
  int txn_size = 0;
  long events = 0;
  double recv_seconds = 0;
  double ours_seconds = 0;
  double walsender_cpu = 0, broker_cpu = 0, pgoutbox_cpu = 0;
};

Row measure(test::PgCluster& pg, test::KafkaBroker& kafka, int txn_size, long events) {
  Row row{txn_size, events};
  const std::string ours = fmt::format("ours_{}", txn_size), recv = fmt::format("recv_{}", txn_size);
  pg.exec(fmt::format("SELECT pg_create_logical_replication_slot('{}', 'pgoutput'), "
                      "pg_create_logical_replication_slot('{}', 'pgoutput')", ours, recv));
  std::fprintf(stderr, "writing %ld events in transactions of %d…\n", events, txn_size);
  const long txns = events / txn_size;
  for (long done = 0; done < txns;) {
    const long batch = std::min(txns - done, 20'000L);
    pg.exec(fmt::format(
        "DO $$ BEGIN FOR t IN 1..{0} LOOP INSERT INTO bench_outbox (aggregatetype, aggregateid, type, payload) "
        "SELECT 'Order', 'order-' || ((t * {1} + g) % 1000), 'OrderCreated', "
        "jsonb_build_object('order', t * {1} + g, 'pad', repeat('x', 150)) FROM generate_series(1, {1}) g; COMMIT; "
        "END LOOP; END $$",
        batch, txn_size));
    done += batch;
  }
  const Lsn end = *Lsn::parse(*pg.query_value("SELECT pg_logical_emit_message(false, 'bench-end', '')"));

  row.recv_seconds = bench::drain_with_pg_recvlogical(pg, recv, "bench_pub", end, 3);

  config::Config cfg;
  cfg.postgres.dsn = pg.dsn();
  cfg.postgres.slot = ours;
  cfg.postgres.publication = "bench_pub";
  cfg.postgres.application_name = "pgoutbox-bench";
  cfg.kafka.brokers = kafka.bootstrap();
  config::TableConfig table;
  table.name = "bench_outbox";
  cfg.tables.push_back(table);

  relay::Relay relay(cfg);
  std::atomic<bool> finished{false};
  double walsender_cpu0 = -1;
  pid_t walsender = 0;
  const double broker_cpu0 = bench::process_cpu_seconds(kafka.pid());
  const double self_cpu0 = bench::self_cpu_seconds();
  const auto t0 = Clock::now();
  std::thread runner([&] {
    relay.run();
    finished = true;
  });
  // Poll the relay's counters on its own thread; the walsender's pid once it exists.
  for (;;) {
    auto acked = std::make_shared<std::promise<std::uint64_t>>();
    auto f = acked->get_future();
    boost::asio::post(relay.io(), [&relay, acked] { acked->set_value(relay.counters().records_acked); });
    if (f.wait_for(std::chrono::seconds(5)) == std::future_status::ready && f.get() >= static_cast<std::uint64_t>(events)) break;
    if (finished) throw std::runtime_error("the relay ended early");
    if (walsender == 0) {
      if (const auto pid = pg.query_value("SELECT pid FROM pg_stat_replication WHERE application_name = 'pgoutbox-bench'")) {
        walsender = std::stoi(*pid);
        walsender_cpu0 = bench::process_cpu_seconds(walsender);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  row.ours_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  row.pgoutbox_cpu = bench::self_cpu_seconds() - self_cpu0;
  row.broker_cpu = bench::process_cpu_seconds(kafka.pid()) - broker_cpu0;
  if (walsender != 0) row.walsender_cpu = bench::process_cpu_seconds(walsender) - walsender_cpu0;
  boost::asio::post(relay.io(), [&] { relay.stop(); });
  runner.join();
  pg.exec(fmt::format("SELECT pg_drop_replication_slot('{}'), pg_drop_replication_slot('{}')", ours, recv));
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pgoutbox end-to-end throughput (commit → Kafka ack) beside pg_recvlogical on the same WAL"};
  long events_1 = 200'000;
  long events_100 = 1'000'000;
  app.add_option("--events-1", events_1, "events written in 1-row transactions");
  app.add_option("--events-100", events_100, "events written in 100-row transactions");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);

  test::PgCluster pg({{"shared_buffers", "256MB"}, {"max_wal_size", "8GB"}, {"checkpoint_timeout", "30min"},
                      {"synchronous_commit", "off"}});
  test::KafkaBroker kafka;
  pg.exec(
      "CREATE TABLE bench_outbox (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text NOT NULL, "
      "aggregateid text NOT NULL, type text NOT NULL, payload jsonb NOT NULL);"
      "CREATE PUBLICATION bench_pub FOR TABLE bench_outbox WITH (publish = 'insert')");
  test::create_topic(kafka.bootstrap(), "outbox.event.Order", 6);

  std::vector<Row> rows;
  if (events_1 > 0) rows.push_back(measure(pg, kafka, 1, events_1));
  if (events_100 > 0) rows.push_back(measure(pg, kafka, 100, events_100));

  std::printf("\n| events per transaction | events | pg_recvlogical events/s | pgoutbox events/s (commit → ack) | "
              "of ceiling | CPU s: walsender / broker / pgoutbox |\n|---|---|---|---|---|---|\n");
  for (const auto& r : rows) {
    const double recv_rate = static_cast<double>(r.events) / r.recv_seconds;
    const double ours_rate = static_cast<double>(r.events) / r.ours_seconds;
    std::printf("| %d | %ld | %.0f | %.0f | %.1f%% | %.1f / %.1f / %.1f |\n", r.txn_size, r.events, recv_rate, ours_rate,
                100.0 * ours_rate / recv_rate, r.walsender_cpu, r.broker_cpu, r.pgoutbox_cpu);
  }
  return 0;
}
