#include "workload.h"

#include <libpq-fe.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "cpu_meter.h"

namespace pgoutbox::bench {
namespace {

constexpr std::string_view kIdPrefix = "00000000-0000-4000-8000-";

struct Conn {
  explicit Conn(const std::string& dsn) : pg(PQconnectdb(dsn.c_str())) {
    if (PQstatus(pg) != CONNECTION_OK) throw std::runtime_error(std::string("workload: ") + PQerrorMessage(pg));
  }
  ~Conn() { PQfinish(pg); }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  void check(PGresult* res, const char* what) const {
    const auto status = PQresultStatus(res);
    const bool ok = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
    std::string message = ok ? "" : PQresultErrorMessage(res);
    PQclear(res);
    if (!ok) throw std::runtime_error(fmt::format("workload {}: {}", what, message));
  }
  PGconn* pg;
};

// One statement, so one round trip and one implicit transaction: the order row, then its
// events, generated on the server (the application's own insert, not a bulk load).
std::string insert_sql(const WorkloadSpec& spec) {
  if (spec.messages) {
    return fmt::format(
        "WITH business AS (INSERT INTO orders (customer, total) "
        "VALUES ('customer-' || ($1::bigint % 1000), ($1::bigint % 50000) / 100.0) RETURNING id) "
        "SELECT count(pg_logical_emit_message(true, 'outbox', jsonb_build_object("
        "'id', '{}' || lpad(to_hex(s), 12, '0'), 'aggregatetype', $3::text, 'aggregateid', 'key-' || (s % {}), "
        "'type', 'OrderCreated', "
        "'payload', jsonb_build_object('order', b.id, 'seq', s, 'pad', repeat('x', $4::int)))::text)) "
        "FROM business b, generate_series($1::bigint, $2::bigint) s",
        kIdPrefix, spec.keys);
  }
  // The oversized event ($5, -1 in a transaction without one) pads with base64 of random bytes:
  // 16 from each md5, $6 of them in all.
  const std::string pad =
      spec.oversized_share > 0
          ? "CASE WHEN s = $5::bigint THEN (SELECT translate(encode(string_agg(decode(md5(random()::"
            "text), 'hex'), ''::bytea), 'base64'), E'\\n', '') FROM generate_series(1, $6::int)) "
            "ELSE repeat('x', $4::int) END"
          : "repeat('x', $4::int)";
  return fmt::format(
      "WITH business AS (INSERT INTO orders (customer, total) "
      "VALUES ('customer-' || ($1::bigint % 1000), ($1::bigint % 50000) / 100.0) RETURNING id) "
      "INSERT INTO {} (id, aggregatetype, aggregateid, type, payload) "
      "SELECT ('{}' || lpad(to_hex(s), 12, '0'))::uuid, $3::text, 'key-' || (s % {}), 'OrderCreated', "
      "jsonb_build_object('order', b.id, 'seq', s, 'pad', {}) "
      "FROM business b, generate_series($1::bigint, $2::bigint) s",
      spec.outbox_table, kIdPrefix, spec.keys, pad);
}

// jsonb prints {"pad": "…", "seq": N, "order": M}: about 40 bytes around the padding.
int pad_for(int payload_bytes) { return std::max(0, payload_bytes - 40); }

void writer(const WorkloadSpec& spec, int index, std::int64_t txns, WorkloadResult& out,
            std::chrono::steady_clock::time_point start, double& backend_cpu_s) {
  Conn conn(spec.dsn);
  conn.check(PQexec(conn.pg, spec.synchronous_commit ? "SET synchronous_commit = on" : "SET synchronous_commit = off"),
             "set");
  const int params_count = spec.oversized_share > 0 ? 6 : 4;
  conn.check(PQprepare(conn.pg, "emit", insert_sql(spec).c_str(), params_count, nullptr), "prepare");
  const std::string pad = std::to_string(pad_for(spec.payload_bytes));
  // Base64 gives 4 characters per 3 bytes: the md5s (16 bytes each) that make oversized_bytes.
  const std::string md5s = std::to_string((pad_for(spec.oversized_bytes) * 3 / 4 + 15) / 16);
  const double txn_interval_s = spec.events_per_second > 0 ? spec.events_per_txn / spec.events_per_second : 0;
  for (std::int64_t t = index; t < txns; t += spec.connections) {
    if (txn_interval_s > 0) {
      std::this_thread::sleep_until(start +
                                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                        std::chrono::duration<double>(txn_interval_s * static_cast<double>(t))));
    }
    const std::int64_t first = spec.first_seq + t * spec.events_per_txn;
    const std::int64_t last = std::min(first + spec.events_per_txn, spec.first_seq + spec.events) - 1;
    const std::string first_s = std::to_string(first), last_s = std::to_string(last);
    const std::string oversized_s =
        oversized_event(first - spec.first_seq, spec.events_per_txn, spec.oversized_share) ? first_s : "-1";
    const char* params[6] = {first_s.c_str(), last_s.c_str(),      spec.aggregate_type.c_str(),
                             pad.c_str(),     oversized_s.c_str(), md5s.c_str()};
    conn.check(PQexecPrepared(conn.pg, "emit", params_count, params, nullptr, nullptr, 0), "insert");
    const std::int64_t now = realtime_us();
    for (std::int64_t seq = first; seq <= last; ++seq)
      out.commit_us[static_cast<std::size_t>(seq - spec.first_seq)] = now;
  }
  // The server runs on this machine (the bench starts it), so its backend's /proc entry is ours to read.
  backend_cpu_s = process_cpu_seconds(PQbackendPID(conn.pg));
}

}  // namespace

std::int64_t realtime_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool oversized_event(std::int64_t seq, int events_per_txn, double share) {
  if (share <= 0 || seq % events_per_txn != 0) return false;
  const auto every = std::max<std::int64_t>(1, std::llround(1 / share));
  return (seq / events_per_txn) % every == every - 1;
}

std::string event_id(std::int64_t seq) { return fmt::format("{}{:012x}", kIdPrefix, seq); }

std::optional<std::int64_t> seq_of_event_id(std::string_view id) {
  if (id.size() != kIdPrefix.size() + 12 || id.substr(0, kIdPrefix.size()) != kIdPrefix) return std::nullopt;
  std::int64_t seq = 0;
  const auto digits = id.substr(kIdPrefix.size());
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), seq, 16);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return seq;
}

WorkloadResult run_workload(const WorkloadSpec& spec) {
  if (spec.events_per_txn < 1 || spec.connections < 1 || spec.events < 1) {
    throw std::invalid_argument("workload: events, events per transaction and connections must be positive");
  }
  if (spec.messages && spec.oversized_share > 0) {
    throw std::invalid_argument("workload: oversized events are outbox rows, not logical decoding messages");
  }
  WorkloadResult result;
  result.commit_us.assign(static_cast<std::size_t>(spec.events), 0);
  const std::int64_t txns = (spec.events + spec.events_per_txn - 1) / spec.events_per_txn;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(spec.connections));
  std::vector<double> cpu(static_cast<std::size_t>(spec.connections), 0);
  for (int i = 0; i < spec.connections; ++i) {
    threads.emplace_back([&, i] {
      try {
        writer(spec, i, txns, result, start, cpu[static_cast<std::size_t>(i)]);
      } catch (...) {
        errors[static_cast<std::size_t>(i)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const double c : cpu) result.backend_cpu_s += c;
  return result;
}

}  // namespace pgoutbox::bench
