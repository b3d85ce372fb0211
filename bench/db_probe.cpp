#include "db_probe.h"

#include <chrono>
#include <stdexcept>

#include <fmt/format.h>

#include "cpu_meter.h"
#include "eventually.h"

namespace pgoutbox::bench {
namespace {

std::int64_t int_value(const test::PgCluster& pg, const std::string& sql) {
  const auto v = pg.query_value(sql);
  return v ? std::stoll(*v) : 0;
}

}  // namespace

DbProbe::DbProbe(const test::PgCluster& pg, std::string role, std::string table)
    : pg_(pg), role_(std::move(role)), table_(std::move(table)) {}

DbProbe::~DbProbe() {
  sampling_ = false;
  if (sampler_.joinable()) sampler_.join();
}

void DbProbe::begin() {
  cpu_by_pid_.clear();
  pg_.exec("SELECT pg_stat_statements_reset()");
  dead_start_ = int_value(pg_, fmt::format("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = '{}'", table_));
  wal_start_ = *pg_.query_value("SELECT pg_current_wal_lsn()");
  sampling_ = true;
  sampler_ = std::thread([this] {
    auto conn = pg_.connect();
    while (sampling_) {
      sample(conn.get());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    sample(conn.get());
  });
}

void DbProbe::sample(PGconn* conn) {
  PGresult* res = PQexec(conn, fmt::format("SELECT pid FROM pg_stat_activity WHERE usename = '{}'", role_).c_str());
  if (PQresultStatus(res) == PGRES_TUPLES_OK) {
    std::lock_guard lock(mutex_);
    for (int i = 0; i < PQntuples(res); ++i) {
      const pid_t pid = std::stoi(PQgetvalue(res, i, 0));
      const double cpu = process_cpu_seconds(pid);
      auto& seen = cpu_by_pid_[pid];
      if (cpu > seen) seen = cpu;
    }
  }
  PQclear(res);
}

void DbProbe::stop_sampling() {
  sampling_ = false;
  if (sampler_.joinable()) sampler_.join();
}

DbCost DbProbe::end() {
  stop_sampling();
  DbCost cost;
  for (const auto& [pid, cpu] : cpu_by_pid_) cost.backend_cpu_s += cpu;
  // The contender's sessions flush their table statistics when they exit.
  test::eventually(
      [&] {
        return int_value(pg_, fmt::format("SELECT count(*) FROM pg_stat_activity WHERE usename = '{}'", role_)) == 0;
      },
      std::chrono::seconds(10));
  cost.wal_bytes =
      int_value(pg_, fmt::format("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{}')::bigint", wal_start_));
  const auto calls = pg_.query(fmt::format(
      "SELECT coalesce(sum(calls), 0), coalesce(sum(calls) FILTER (WHERE query ~* '\\moutbox(_polled)?\\M'), 0) "
      "FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid WHERE r.rolname = '{}'",
      role_));
  cost.statements = std::stoll(*calls.at(0).at(0));
  cost.outbox_statements = std::stoll(*calls.at(0).at(1));
  cost.dead_tuples =
      int_value(pg_, fmt::format("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = '{}'", table_)) -
      dead_start_;
  return cost;
}

}  // namespace pgoutbox::bench
