#pragma once

// Creating a logical slot on a hot standby (PostgreSQL 16+) waits until the standby replays a
// running-transactions record (xl_running_xacts) written by the primary after the creation began:
// only the primary can write one. Its background writer does so at most every 15 s, and only after
// other WAL; an idle primary writes none until its next checkpoint, and the creation waits that
// long. Rows the primary commits meanwhile lie before the slot's consistent point: the new slot
// never holds them (docs/versions.md, "Decoding on a standby").
//
// While a creation is under way, this asks the primary for such a record every second with
// pg_log_standby_snapshot() when a primary DSN is configured, and otherwise says every 10 s in the
// log what the creation waits for and how to shorten it.

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace pgoutbox::replication {

struct PrimaryAccess {
  std::string dsn;  // empty: none configured
  std::string password;
  std::string application_name;
};

class StandbySnapshotRequest {
 public:
  // Starts at once; ends when destroyed (the creation returned or failed).
  explicit StandbySnapshotRequest(PrimaryAccess primary);
  ~StandbySnapshotRequest();
  StandbySnapshotRequest(const StandbySnapshotRequest&) = delete;
  StandbySnapshotRequest& operator=(const StandbySnapshotRequest&) = delete;

 private:
  void run();
  // One pg_log_standby_snapshot() on the primary; false (and logged once) when it failed.
  bool request_once();

  PrimaryAccess primary_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  bool failure_logged_ = false;
  std::thread thread_;
};

}  // namespace pgoutbox::replication
