#include "pgoutbox/replication/standby_snapshot.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "pgoutbox/replication/connection.h"

namespace pgoutbox::replication {
namespace {

using namespace std::chrono_literals;

constexpr auto kRequestInterval = 1s;
constexpr auto kWaitNotice = 10s;

}  // namespace

StandbySnapshotRequest::StandbySnapshotRequest(PrimaryAccess primary)
    : primary_(std::move(primary)), thread_([this] { run(); }) {}

StandbySnapshotRequest::~StandbySnapshotRequest() {
  {
    const std::lock_guard lock(mutex_);
    done_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

bool StandbySnapshotRequest::request_once() {
  try {
    const auto conn = Connection::open(primary_.dsn, false, primary_.application_name + "-snapshot", primary_.password,
                                       std::chrono::seconds(5));
    conn.exec("SELECT pg_catalog.pg_log_standby_snapshot()");
    return true;
  } catch (const std::exception& e) {
    if (!failure_logged_) {
      failure_logged_ = true;
      spdlog::warn(
          "creating the slot on this standby: pg_log_standby_snapshot() on postgres.primary_dsn failed ({}); the "
          "creation waits for the primary's own next running-transactions record. Fix: let the role connect to the "
          "primary and GRANT EXECUTE ON FUNCTION pg_log_standby_snapshot() to it",
          e.what());
    }
    return false;
  }
}

void StandbySnapshotRequest::run() {
  const auto started = std::chrono::steady_clock::now();
  auto next_notice = started + kWaitNotice;
  // The first request goes out after a moment: the creation must have begun waiting, or the
  // record it asks for is one the creation does not count.
  auto next_request = started + 200ms;
  std::unique_lock lock(mutex_);
  while (!done_) {
    const auto now = std::chrono::steady_clock::now();
    if (!primary_.dsn.empty() && now >= next_request) {
      lock.unlock();
      request_once();
      lock.lock();
      next_request = std::chrono::steady_clock::now() + kRequestInterval;
      continue;
    }
    if (now >= next_notice) {
      const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - started).count();
      if (primary_.dsn.empty()) {
        spdlog::warn(
            "creating the slot on this standby for {} s: it waits for the primary's next running-transactions record "
            "(its background writer writes one within 15 s of other WAL, an idle primary only at its next "
            "checkpoint); rows committed before it are not in the new slot. Fix: set postgres.primary_dsn (pgoutbox "
            "then calls pg_log_standby_snapshot() there), or run SELECT pg_log_standby_snapshot() on the primary",
            waited);
      } else {
        spdlog::warn(
            "creating the slot on this standby for {} s although the primary was asked for running-transactions "
            "records: the standby may not be replaying (see pg_stat_wal_receiver on it)",
            waited);
      }
      next_notice = now + kWaitNotice;
    }
    wake_.wait_until(lock, primary_.dsn.empty() ? next_notice : std::min(next_notice, next_request));
  }
}

}  // namespace pgoutbox::replication
