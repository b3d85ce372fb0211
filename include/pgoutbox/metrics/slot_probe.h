#pragma once

// The slot's metrics, as the SlotMonitor reads them from pg_replication_slots on its own
// connection: replication lag and retained WAL in bytes, wal_status, active, and whether
// Postgres answers at all; on a hot standby, its replay delay and what it holds on the primary.

#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

namespace pgoutbox::metrics {

// One reading of the slot's row. lag and retained are NULL in Postgres when the slot has no
// confirmed_flush_lsn / restart_lsn (a lost slot has no restart_lsn).
struct SlotSample {
  bool exists = false;
  bool active = false;
  std::string wal_status;                      // reserved, extended, unreserved, lost
  std::optional<std::int64_t> lag_bytes;       // pg_current_wal_lsn() - confirmed_flush_lsn
  std::optional<std::int64_t> retained_bytes;  // pg_current_wal_lsn() - restart_lsn
  // A hot standby (pg_is_in_recovery()): WAL received but not replayed, and how long ago the last
  // replayed transaction committed while WAL is left to replay (0 when it has caught up).
  bool in_recovery = false;
  std::optional<std::int64_t> unreplayed_bytes;
  std::optional<double> replay_delay_seconds;
  // Read on the primary (postgres.primary_dsn): WAL it wrote that the standby has not replayed,
  // and the age in transactions of the xmin and catalog_xmin the standby's physical slot holds
  // there through hot_standby_feedback (NULL: holds none).
  std::optional<std::int64_t> behind_primary_bytes;
  std::optional<std::int64_t> primary_xmin_age;
  std::optional<std::int64_t> primary_catalog_xmin_age;
};

class SlotProbe {
 public:
  explicit SlotProbe(prometheus::Registry& registry);

  // Postgres answered with this reading.
  void record(const SlotSample& sample);
  // Postgres did not answer (connection refused, timeout, error).
  void unreachable();

  // The last lag read, for the summary line; nullopt before the first reading.
  std::optional<std::int64_t> lag_bytes() const;
  bool postgres_up() const { return up_.load(); }

  static constexpr const char* kWalStatuses[] = {"reserved", "extended", "unreserved", "lost", "missing"};

 private:
  prometheus::Gauge& up_gauge_;
  prometheus::Gauge& lag_gauge_;
  prometheus::Gauge& retained_gauge_;
  prometheus::Gauge& active_gauge_;
  prometheus::Family<prometheus::Gauge>& wal_status_;
  prometheus::Gauge& in_recovery_gauge_;
  prometheus::Gauge& unreplayed_gauge_;
  prometheus::Gauge& replay_delay_gauge_;
  prometheus::Gauge& behind_primary_gauge_;
  prometheus::Gauge& primary_xmin_age_gauge_;
  prometheus::Gauge& primary_catalog_xmin_age_gauge_;
  std::atomic<bool> up_{false};
  std::atomic<std::int64_t> lag_{-1};
};

}  // namespace pgoutbox::metrics
