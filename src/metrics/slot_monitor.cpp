// pg_replication_slots (PG15 docs §54.19): confirmed_flush_lsn is what the consumer confirmed,
// restart_lsn the oldest WAL the slot still needs; both differences to pg_current_wal_lsn() are
// what an operator watches (lag, and disk the slot pins). The query is sent with libpq's
// asynchronous calls and its answer awaited with a poll() deadline (connect_timeout bounds the
// connection), so a frozen server cannot hold the thread.
#include "pgoutbox/metrics/slot_monitor.h"

#include <libpq-fe.h>

#include "pgoutbox/replication/connection.h"
#include <poll.h>

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <vector>

namespace pgoutbox::metrics {
namespace {

constexpr const char* kQuery =
    "SELECT active, wal_status, "
    "pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint, "
    "pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint "
    "FROM pg_catalog.pg_replication_slots WHERE slot_name = $1";

struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ConnPtr = std::unique_ptr<PGconn, ConnDeleter>;
using ResultPtr = std::unique_ptr<PGresult, ResultDeleter>;

std::optional<std::int64_t> int_or_null(const PGresult* r, int column) {
  if (PQgetisnull(r, 0, column)) return std::nullopt;
  return std::strtoll(PQgetvalue(r, 0, column), nullptr, 10);
}

// The first line of libpq's message; it never holds the password (libpq does not echo it).
std::string first_line(const char* message) {
  std::string text = message == nullptr ? "" : message;
  if (const auto nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
  return text;
}

}  // namespace

class SlotMonitor::Reader {
 public:
  Reader(SlotMonitorSettings settings, SlotProbe& probe) : settings_(std::move(settings)), probe_(probe) {}

  void tick() {
    std::string error;
    const auto sample = read(error);
    if (sample) {
      if (reported_down_) spdlog::info("slot monitor: Postgres answers again");
      reported_down_ = false;
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
    if (!connection_ && !connect(error)) return std::nullopt;
    PGconn* conn = connection_.get();
    const char* values[] = {settings_.slot.c_str()};
    if (PQsendQueryParams(conn, kQuery, 1, nullptr, values, nullptr, nullptr, 0) != 1) {
      error = first_line(PQerrorMessage(conn));
      return std::nullopt;
    }
    const auto deadline = std::chrono::steady_clock::now() + settings_.timeout;
    while (PQisBusy(conn) == 1) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd fd{PQsocket(conn), POLLIN, 0};
      if (left.count() <= 0 || ::poll(&fd, 1, static_cast<int>(left.count())) == 0) {
        error = "no answer within " + std::to_string(settings_.timeout.count()) + " ms";
        return std::nullopt;
      }
      if (PQconsumeInput(conn) != 1) {
        error = first_line(PQerrorMessage(conn));
        return std::nullopt;
      }
    }
    ResultPtr result(PQgetResult(conn));
    while (ResultPtr extra{PQgetResult(conn)}) {
    }
    if (!result || PQresultStatus(result.get()) != PGRES_TUPLES_OK) {
      error = first_line(result ? PQresultErrorMessage(result.get()) : PQerrorMessage(conn));
      return std::nullopt;
    }
    SlotSample sample;
    if (PQntuples(result.get()) == 0) return sample;
    const PGresult* r = result.get();
    sample.exists = true;
    sample.active = std::string_view(PQgetvalue(r, 0, 0)) == "t";
    sample.wal_status = PQgetisnull(r, 0, 1) ? "" : PQgetvalue(r, 0, 1);
    sample.lag_bytes = int_or_null(r, 2);
    sample.retained_bytes = int_or_null(r, 3);
    return sample;
  }

  bool connect(std::string& error) {
    // dbname first with expand_dbname: the DSN's own settings apply, and the keywords after it
    // (ours) take precedence over them.
    const std::string timeout = std::to_string(std::max<long long>(1, settings_.timeout.count() / 1000));
    // The session settings every pgoutbox connection pins (replication/connection.h).
    std::vector<const char*> keys = {"dbname", "application_name", "connect_timeout", "client_encoding", "options"};
    std::vector<const char*> values = {settings_.dsn.c_str(), settings_.application_name.c_str(), timeout.c_str(),
                                       replication::kClientEncoding, replication::kSessionOptions};
    if (!settings_.password.empty()) {
      keys.push_back("password");
      values.push_back(settings_.password.c_str());
    }
    keys.push_back(nullptr);
    values.push_back(nullptr);
    ConnPtr conn(PQconnectdbParams(keys.data(), values.data(), 1));
    if (!conn || PQstatus(conn.get()) != CONNECTION_OK) {
      error = conn ? first_line(PQerrorMessage(conn.get())) : "out of memory";
      return false;
    }
    connection_ = std::move(conn);
    return true;
  }

  SlotMonitorSettings settings_;
  SlotProbe& probe_;
  ConnPtr connection_;
  bool reported_down_ = false;
};

SlotMonitor::SlotMonitor(SlotMonitorSettings settings, SlotProbe& probe)
    : reader_(std::make_unique<Reader>(settings, probe)),
      periodic_(settings.interval, [reader = reader_.get()] { reader->tick(); }) {}

SlotMonitor::~SlotMonitor() = default;

}  // namespace pgoutbox::metrics
