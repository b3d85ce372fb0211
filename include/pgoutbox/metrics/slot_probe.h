#pragma once

// The slot's metrics, as the SlotMonitor reads them from pg_replication_slots on its own
// connection: replication lag and retained WAL in bytes, wal_status, active, and whether
// Postgres answers at all.

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
  std::atomic<bool> up_{false};
  std::atomic<std::int64_t> lag_{-1};
};

}  // namespace pgoutbox::metrics
