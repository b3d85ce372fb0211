#pragma once

// Reads the slot's row of pg_replication_slots every interval on a separate, ordinary libpq
// connection (not the replication one: that one is in CopyBoth mode and must never wait on a
// query), on its own thread, and records it in the SlotProbe; on a hot standby, also its replay
// delay and, given the primary, what the standby holds there. When Postgres is down it records
// that and reconnects at the next tick, logging only the change (down once, back once). Every
// wait is bounded, so a frozen server delays nothing but this thread.

#include <chrono>
#include <memory>
#include <string>

#include "pgoutbox/metrics/slot_probe.h"
#include "pgoutbox/periodic.h"

namespace pgoutbox::metrics {

struct SlotMonitorSettings {
  std::string dsn;       // libpq conninfo or URI
  std::string password;  // passed apart from the DSN; may be empty
  // postgres.primary_dsn, or empty: when dsn is a hot standby, its primary, read for how far the
  // standby's replay is behind and the horizons its physical slot holds there.
  std::string primary_dsn;
  std::string application_name = "pgoutbox-metrics";
  std::string slot;
  std::chrono::milliseconds interval{5000};
  std::chrono::milliseconds timeout{5000};  // connect and query
};

class SlotMonitor {
 public:
  SlotMonitor(const SlotMonitorSettings& settings, SlotProbe& probe);
  ~SlotMonitor();
  SlotMonitor(const SlotMonitor&) = delete;
  SlotMonitor& operator=(const SlotMonitor&) = delete;

 private:
  class Reader;
  std::unique_ptr<Reader> reader_;
  Periodic periodic_;  // last: stops before the reader goes
};

}  // namespace pgoutbox::metrics
