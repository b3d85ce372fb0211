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
    char* literal = PQescapeLiteral(conn, settings_.slot.data(), settings_.slot.size());
    if (literal == nullptr) {
      error = first_line(PQerrorMessage(conn));
      return std::nullopt;
    }
    const std::string query = replication::slot_query(literal, PQserverVersion(conn));
    PQfreemem(literal);
    if (PQsendQuery(conn, query.c_str()) != 1) {
      error = first_line(PQerrorMessage(conn));
      return std::nullopt;
    }
    const auto deadline = std::chrono::steady_clock::now() + settings_.timeout;
    while (PQisBusy(conn) == 1) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
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
    while (ResultPtr extra{PQgetResult(conn)}) {}
    if (!result || PQresultStatus(result.get()) != PGRES_TUPLES_OK) {
      error = first_line(result ? PQresultErrorMessage(result.get()) : PQerrorMessage(conn));
      return std::nullopt;
    }
    SlotSample sample;
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
  bool reported_problem_ = false;
};

SlotMonitor::SlotMonitor(const SlotMonitorSettings& settings, SlotProbe& probe)
    : reader_(std::make_unique<Reader>(settings, probe)),
      periodic_(settings.interval, [reader = reader_.get()] { reader->tick(); }) {}

SlotMonitor::~SlotMonitor() = default;

}  // namespace pgoutbox::metrics
