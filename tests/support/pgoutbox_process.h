#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "child_process.h"
#include "pgoutbox_config.h"  // the config file a PgoutboxProcess is usually started with

namespace pgoutbox::test {

// `pgoutbox run -c FILE` as a child process (its own process group, killed with the test).
class PgoutboxProcess {
 public:
  PgoutboxProcess(const std::string& binary, const std::string& config_path, const std::string& log_path,
                  std::vector<std::string> extra_env = {}, const std::vector<std::string>& extra_args = {});

  pid_t pid() const { return child_.pid(); }
  bool running() { return child_.running(); }
  void kill9() { child_.kill_and_reap(); }
  void signal(int sig) const { child_.signal_leader(sig); }
  // The exit code when it exited normally within `timeout`; -signal when a signal ended it;
  // nullopt while it still runs.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);

 private:
  ChildProcess child_;
};

// The slot's confirmed_flush_lsn as Postgres prints it, or nullopt while the slot does not exist.
std::optional<std::string> slot_confirmed_lsn(const std::string& dsn, const std::string& slot);
// The walsender pid holding the slot, or nullopt when it is free.
std::optional<int> slot_active_pid(const std::string& dsn, const std::string& slot);

}  // namespace pgoutbox::test
