// pg_replication_slots (PG15 docs §54.19): confirmed_flush_lsn is what the consumer confirmed,
// restart_lsn the oldest WAL the slot still needs; both differences to pg_current_wal_lsn() are
// what an operator watches (lag, and disk the slot pins). The query is sent with libpq's
// asynchronous calls and its answer awaited with a poll() deadline (connect_timeout bounds the
// connection), so a frozen server cannot hold the thread.
#include "pgoutbox/metrics/slot_monitor.h"

#include "pgoutbox/replication/slot.h"
#include "pgoutbox/secrets.h"

#include <libpq-fe.h>

#include <poll.h>
#include "pgoutbox/replication/connection.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <vector>

namespace pgoutbox::metrics {
namespace {

struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ConnPtr = std::unique_ptr<PGconn, ConnDeleter>;
using ResultPtr = std::unique_ptr<PGresult, ResultDeleter>;

// The first line of libpq's message, without the configured secrets: libpq quotes what it cannot
// parse of the DSN, a password with a bad percent-escape among it.
std::string first_line(const char* message) {
  std::string text = redact_secrets(message == nullptr ? "" : message);
  if (const auto nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
  return text;
}

// Sends `query` with libpq's asynchronous calls and awaits its answer until `timeout`: a frozen
// server holds this thread no longer than that. Null with `error` set when it did not answer.
ResultPtr bounded_query(PGconn* conn, const std::string& query, std::chrono::milliseconds timeout, std::string& error) {
  if (PQsendQuery(conn, query.c_str()) != 1) {
    error = first_line(PQerrorMessage(conn));
    return nullptr;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (PQisBusy(conn) == 1) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd fd{PQsocket(conn), POLLIN, 0};
    if (left.count() <= 0 || ::poll(&fd, 1, static_cast<int>(left.count())) == 0) {
      error = "no answer within " + std::to_string(timeout.count()) + " ms";
      return nullptr;
    }
    if (PQconsumeInput(conn) != 1) {
      error = first_line(PQerrorMessage(conn));
      return nullptr;
    }
  }
  ResultPtr result(PQgetResult(conn));
  while (ResultPtr extra{PQgetResult(conn)}) {}
  if (!result || PQresultStatus(result.get()) != PGRES_TUPLES_OK) {
    error = first_line(result ? PQresultErrorMessage(result.get()) : PQerrorMessage(conn));
    return nullptr;
  }
  return result;
}

// An ordinary connection with the session settings every pgoutbox connection pins
// (replication/connection.h); connect_timeout bounds it. dbname first with expand_dbname: the
// DSN's own settings apply, and the keywords after it (ours) take precedence over them.
ConnPtr connect_bounded(const SlotMonitorSettings& settings, const std::string& dsn, std::string& error) {
  const std::string timeout = std::to_string(std::max<long long>(1, settings.timeout.count() / 1000));
  std::vector<const char*> keys = {"dbname", "application_name", "connect_timeout", "client_encoding", "options"};
  std::vector<const char*> values = {dsn.c_str(), settings.application_name.c_str(), timeout.c_str(),
                                     replication::kClientEncoding, replication::kSessionOptions};
  if (!settings.password.empty()) {
    keys.push_back("password");
    values.push_back(settings.password.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  ConnPtr conn(PQconnectdbParams(keys.data(), values.data(), 1));
  if (!conn || PQstatus(conn.get()) != CONNECTION_OK) {
    error = conn ? first_line(PQerrorMessage(conn.get())) : "out of memory";
    return nullptr;
  }
  return conn;
}

std::optional<std::int64_t> int_or_null(const PGresult* r, int col) {
  if (PQgetisnull(r, 0, col) != 0) return std::nullopt;
  return std::stoll(PQgetvalue(r, 0, col));
}

// On a hot standby: WAL received but not replayed, how long ago the last replayed transaction
// committed while WAL is left to replay (0 when caught up: an idle primary is no delay), the
// physical slot it streams through on its primary, and its replay position.
constexpr const char* kRecoveryQuery =
    "SELECT pg_catalog.pg_is_in_recovery(), "
    "GREATEST(COALESCE(pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_last_wal_receive_lsn(), "
    "pg_catalog.pg_last_wal_replay_lsn()), 0), 0)::bigint, "
    "CASE WHEN pg_catalog.pg_last_wal_receive_lsn() IS NULL "
    "OR pg_catalog.pg_last_wal_receive_lsn() <= pg_catalog.pg_last_wal_replay_lsn() THEN 0 "
    "ELSE GREATEST(COALESCE(EXTRACT(EPOCH FROM now() - pg_catalog.pg_last_xact_replay_timestamp()), 0), 0) END, "
    "pg_catalog.current_setting('primary_slot_name'), pg_catalog.pg_last_wal_replay_lsn()";

}  // namespace

class SlotMonitor::Reader {
 public:
  Reader(SlotMonitorSettings settings, SlotProbe& probe) : settings_(std::move(settings)), probe_(probe) {}

  void tick() {
    std::string error;
    auto sample = read(error);
    if (sample) {
      if (reported_down_) spdlog::info("slot monitor: Postgres answers again");
      reported_down_ = false;
      if (sample->in_recovery) read_primary(*sample);
      probe_.record(*sample);
      return;
    }
    connection_.reset();  // start afresh at the next tick
    probe_.unreachable();
    if (!reported_down_) spdlog::warn("slot monitor: cannot read slot {}: {}", settings_.slot, error);
    reported_down_ = true;
  }

 private:
  std::optional<SlotSample> read(std::string& error) {
    if (!connection_) connection_ = connect_bounded(settings_, settings_.dsn, error);
    if (!connection_) return std::nullopt;
    PGconn* conn = connection_.get();
    char* literal = PQescapeLiteral(conn, settings_.slot.data(), settings_.slot.size());
    if (literal == nullptr) {
      error = first_line(PQerrorMessage(conn));
      return std::nullopt;
    }
    const std::string query = replication::slot_query(literal, PQserverVersion(conn));
    PQfreemem(literal);
    const auto result = bounded_query(conn, query, settings_.timeout, error);
    if (!result) return std::nullopt;
    SlotSample sample;
    if (!read_recovery(sample, error)) return std::nullopt;
    if (PQntuples(result.get()) == 0) return sample;
    const auto slot = replication::slot_state(result.get(), 0);
    sample.exists = true;
    sample.active = slot.active;
    sample.wal_status = std::string(replication::to_string(slot.wal_status));
    if (slot.confirmed_flush != Lsn{}) sample.lag_bytes = slot.lag_bytes;  // NULL: never confirmed
    if (slot.restart_lsn != Lsn{}) sample.retained_bytes = slot.retained_wal_bytes;
    // The same rules as at start: a slot going bad while pgoutbox runs is said once, when it happens.
    const auto problem = replication::validate_slot(slot, {});
    if (problem && !reported_problem_)
      spdlog::error("slot {}: {}. Fix: {}", settings_.slot, problem->message, problem->fix);
    reported_problem_ = problem.has_value();
    return sample;
  }

  bool read_recovery(SlotSample& sample, std::string& error) {
    const auto result = bounded_query(connection_.get(), kRecoveryQuery, settings_.timeout, error);
    if (!result) return false;
    const PGresult* r = result.get();
    sample.in_recovery = std::string_view(PQgetvalue(r, 0, 0)) == "t";
    if (!sample.in_recovery) return true;
    sample.unreplayed_bytes = int_or_null(r, 1);
    sample.replay_delay_seconds = std::stod(PQgetvalue(r, 0, 2));
    primary_slot_ = PQgetvalue(r, 0, 3);
    replayed_ = PQgetvalue(r, 0, 4);
    return true;
  }

  // With postgres.primary_dsn: how far the primary is ahead of this standby's replay, and the
  // horizons the standby's physical slot holds there through hot_standby_feedback (vacuum of
  // every table, and of the catalog for the logical slot on the standby).
  void read_primary(SlotSample& sample) {
    if (settings_.primary_dsn.empty() || primary_slot_.empty()) return;
    std::string error;
    if (!primary_) primary_ = connect_bounded(settings_, settings_.primary_dsn, error);
    ResultPtr result;
    if (primary_) {
      char* slot = PQescapeLiteral(primary_.get(), primary_slot_.data(), primary_slot_.size());
      char* replayed = PQescapeLiteral(primary_.get(), replayed_.data(), replayed_.size());
      if (slot != nullptr && replayed != nullptr) {
        const std::string query = fmt::format(
            "SELECT GREATEST(pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), {}::pg_lsn), 0)::bigint, "
            "pg_catalog.age(s.xmin), pg_catalog.age(s.catalog_xmin) FROM (SELECT 1) one LEFT JOIN "
            "pg_catalog.pg_replication_slots s ON s.slot_name = {}",
            replayed, slot);
        result = bounded_query(primary_.get(), query, settings_.timeout, error);
      } else {
        error = first_line(PQerrorMessage(primary_.get()));
      }
      PQfreemem(slot);
      PQfreemem(replayed);
    }
    if (!result) {
      primary_.reset();
      if (!reported_primary_down_) {
        spdlog::warn("slot monitor: cannot read the standby's horizons on postgres.primary_dsn: {}", error);
      }
      reported_primary_down_ = true;
      return;
    }
    if (reported_primary_down_) spdlog::info("slot monitor: the primary answers again");
    reported_primary_down_ = false;
    sample.behind_primary_bytes = int_or_null(result.get(), 0);
    sample.primary_xmin_age = int_or_null(result.get(), 1);
    sample.primary_catalog_xmin_age = int_or_null(result.get(), 2);
  }

  SlotMonitorSettings settings_;
  SlotProbe& probe_;
  ConnPtr connection_;
  ConnPtr primary_;           // postgres.primary_dsn, on a standby only
  std::string primary_slot_;  // the standby's primary_slot_name
  std::string replayed_;      // the standby's last replayed position
  bool reported_down_ = false;
  bool reported_primary_down_ = false;
  bool reported_problem_ = false;
};

SlotMonitor::SlotMonitor(const SlotMonitorSettings& settings, SlotProbe& probe)
    : reader_(std::make_unique<Reader>(settings, probe)),
      periodic_(settings.interval, [reader = reader_.get()] { reader->tick(); }) {}

SlotMonitor::~SlotMonitor() = default;

}  // namespace pgoutbox::metrics
