// The baseline pgoutbox replaces: a polling outbox relay, written the way a strong team would.
//
//   bench_polling_relay --dsn DSN --brokers HOST:PORT --topic TOPIC [--table outbox_polled]
//                       [--batch 10000] [--workers 2] [--poll-interval-ms 5] [--mark delete|update]
//
// The table is the outbox with an ordering column `seq`, a `status` column (0 = new) and a
// partial index on (shard, seq) WHERE status = 0, so a claim reads only pending rows, in order.
// Each worker owns one shard (a hash of the aggregate id, so a key's events stay in one worker
// and keep their order; the table's shard count must equal --workers) and loops:
//
//   BEGIN;
//   DELETE FROM t WHERE seq IN (SELECT seq FROM t WHERE status = 0 AND shard = $1
//                               ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING …;
//      (or UPDATE t SET status = 1 … RETURNING … with --mark update)
//   produce every row (same librdkafka settings as pgoutbox), flush, check every delivery report;
//   COMMIT — or ROLLBACK when a delivery failed, so the rows are claimed again.
//
// Claim and mark are one statement, and the transaction stays open until Kafka has acked the
// batch, so a crash anywhere re-sends, never loses. A full batch loops at once; a short one
// sleeps the poll interval. Runs until SIGTERM/SIGINT, finishing the batch in hand.
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "pgoutbox/kafka/producer.h"

namespace {

std::atomic<bool> g_stop{false};

struct Options {
  std::string dsn;
  std::string brokers;
  std::string topic;
  std::string table = "outbox_polled";
  int batch = 10000;
  int workers = 2;
  int poll_interval_ms = 5;
  std::string mark = "delete";
};

struct PgResult {
  explicit PgResult(PGresult* r) : res(r) {}
  ~PgResult() { PQclear(res); }
  PgResult(const PgResult&) = delete;
  PgResult& operator=(const PgResult&) = delete;
  PGresult* res;
};

void expect(PGconn* conn, PGresult* raw, const char* what) {
  PgResult r(raw);
  const auto status = PQresultStatus(r.res);
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    throw std::runtime_error(fmt::format("{}: {}", what, PQerrorMessage(conn)));
  }
}

// Counts the outcomes of one batch's delivery reports (served by rd_kafka_flush on this thread).
struct BatchReports {
  int delivered = 0;
  int failed = 0;
  std::string last_error;
};

void on_delivery(rd_kafka_t*, const rd_kafka_message_t* msg, void*) {
  auto* reports = static_cast<BatchReports*>(msg->_private);
  if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    ++reports->delivered;
  } else {
    ++reports->failed;
    reports->last_error = rd_kafka_err2str(msg->err);
  }
}

rd_kafka_t* make_producer(const Options& options, int worker) {
  pgoutbox::kafka::ProducerSettings settings;
  settings.brokers = options.brokers;
  auto props = pgoutbox::kafka::effective_properties(settings);
  props["client.id"] = fmt::format("polling-relay-{}", worker);
  props.erase("statistics.interval.ms");  // pgoutbox reads them for its metrics; nothing here does
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (const auto& [name, value] : props) {
    if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      throw std::invalid_argument(fmt::format("kafka property {}: {}", name, err));
    }
  }
  rd_kafka_conf_set_dr_msg_cb(conf, &on_delivery);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (rk == nullptr) throw std::runtime_error(fmt::format("cannot create the producer: {}", err));
  return rk;
}

std::string claim_sql(const Options& o) {
  const std::string pending = fmt::format(
      "SELECT seq FROM {0} WHERE status = 0 AND shard = $1 ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED", o.table);
  const std::string returning = " RETURNING seq, id, aggregateid, type, payload";
  if (o.mark == "update")
    return fmt::format("UPDATE {} SET status = 1 WHERE seq IN ({}){}", o.table, pending, returning);
  return fmt::format("DELETE FROM {} WHERE seq IN ({}){}", o.table, pending, returning);
}

void run_worker(const Options& options, int shard) {
  PGconn* conn = PQconnectdb(options.dsn.c_str());
  if (PQstatus(conn) != CONNECTION_OK) throw std::runtime_error(PQerrorMessage(conn));
  rd_kafka_t* rk = make_producer(options, shard);
  expect(conn, PQprepare(conn, "claim", claim_sql(options).c_str(), 2, nullptr), "prepare");
  const std::string shard_s = std::to_string(shard), batch_s = std::to_string(options.batch);
  const char* params[2] = {shard_s.c_str(), batch_s.c_str()};
  std::vector<std::pair<long long, int>> order;  // (seq, row)
  while (!g_stop) {
    expect(conn, PQexec(conn, "BEGIN"), "begin");
    PgResult claimed(PQexecPrepared(conn, "claim", 2, params, nullptr, nullptr, 0));
    if (PQresultStatus(claimed.res) != PGRES_TUPLES_OK) throw std::runtime_error(PQerrorMessage(conn));
    const int rows = PQntuples(claimed.res);
    // RETURNING has no order; publish in commit-sequence order so each key keeps its order.
    order.clear();
    for (int i = 0; i < rows; ++i) order.emplace_back(std::stoll(PQgetvalue(claimed.res, i, 0)), i);
    std::sort(order.begin(), order.end());
    BatchReports reports;
    for (const auto& [seq, i] : order) {
      rd_kafka_headers_t* headers = rd_kafka_headers_new(2);
      rd_kafka_header_add(headers, "id", 2, PQgetvalue(claimed.res, i, 1), PQgetlength(claimed.res, i, 1));
      rd_kafka_header_add(headers, "type", 4, PQgetvalue(claimed.res, i, 3), PQgetlength(claimed.res, i, 3));
      // No copy: the result outlives the flush below.
      const auto err = rd_kafka_producev(
          rk, RD_KAFKA_V_TOPIC(options.topic.c_str()),
          RD_KAFKA_V_KEY(PQgetvalue(claimed.res, i, 2), static_cast<std::size_t>(PQgetlength(claimed.res, i, 2))),
          RD_KAFKA_V_VALUE(PQgetvalue(claimed.res, i, 4), static_cast<std::size_t>(PQgetlength(claimed.res, i, 4))),
          RD_KAFKA_V_HEADERS(headers), RD_KAFKA_V_OPAQUE(&reports), RD_KAFKA_V_END);
      if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_headers_destroy(headers);
        ++reports.failed;
        reports.last_error = rd_kafka_err2str(err);
      }
    }
    while (reports.delivered + reports.failed < rows) rd_kafka_flush(rk, 1000);
    if (reports.failed > 0) {
      std::fprintf(stderr, "polling relay: %d deliveries failed (%s); the batch comes again\n", reports.failed,
                   reports.last_error.c_str());
      expect(conn, PQexec(conn, "ROLLBACK"), "rollback");
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    expect(conn, PQexec(conn, "COMMIT"), "commit");
    if (rows < options.batch) std::this_thread::sleep_for(std::chrono::milliseconds(options.poll_interval_ms));
  }
  rd_kafka_flush(rk, 10'000);
  rd_kafka_destroy(rk);
  PQfinish(conn);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"a polling outbox relay (the baseline pgoutbox is measured against)"};
  Options o;
  app.add_option("--dsn", o.dsn, "libpq connection string")->required();
  app.add_option("--brokers", o.brokers, "Kafka bootstrap servers")->required();
  app.add_option("--topic", o.topic, "destination topic")->required();
  app.add_option("--table", o.table, "the outbox table (with seq, status and shard columns)");
  app.add_option("--batch", o.batch, "rows claimed per transaction")->check(CLI::Range(1, 1'000'000));
  app.add_option("--workers", o.workers, "workers, each with its own shard, connection and producer")
      ->check(CLI::Range(1, 64));
  app.add_option("--poll-interval-ms", o.poll_interval_ms, "sleep after a short batch")->check(CLI::Range(0, 60'000));
  app.add_option("--mark", o.mark, "what happens to a sent row")->check(CLI::IsMember({"delete", "update"}));
  CLI11_PARSE(app, argc, argv);

  std::signal(SIGTERM, [](int) { g_stop = true; });
  std::signal(SIGINT, [](int) { g_stop = true; });
  std::vector<std::thread> workers;
  std::atomic<int> failures{0};
  for (int shard = 0; shard < o.workers; ++shard) {
    workers.emplace_back([&, shard] {
      try {
        run_worker(o, shard);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "polling relay worker %d: %s\n", shard, e.what());
        ++failures;
        g_stop = true;
      }
    });
  }
  for (auto& w : workers) w.join();
  return failures == 0 ? 0 : 1;
}
