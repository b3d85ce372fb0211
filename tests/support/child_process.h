#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace pgoutbox::test {

// The unprivileged account services run as when the tests run as root (Postgres refuses root).
struct RunAs {
  uid_t uid;
  gid_t gid;
  std::string name;
};
// nullopt when not root (services then run as the current user).
std::optional<RunAs> service_account();

// A service process in its own process group, so that stop/kill/pause reach all of its
// children (Postgres backends). It dies with the test binary: SIGKILL as parent-death signal,
// plus a handler that kills every live group on SIGINT/SIGTERM/SIGHUP before the binary dies.
class ChildProcess {
 public:
  struct Options {
    std::vector<std::string> argv;  // argv[0] is the executable's path
    std::string log_path;           // stdout and stderr are appended here
    std::optional<RunAs> run_as;
    std::vector<std::string> extra_env;  // "NAME=value"
  };

  ChildProcess() = default;
  explicit ChildProcess(Options options);
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  bool running();
  // Sends sig to the whole process group.
  void signal_group(int sig) const;
  // Sends sig to the leader only.
  void signal_leader(int sig) const;
  // Waits for the leader to exit; returns its wait status, or nullopt on timeout.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  // SIGKILL to the group, then reaps the leader.
  void kill_and_reap();

 private:
  void release();
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// Creates a fresh directory under $TMPDIR (or /tmp) owned by `owner` and removes it on scope exit.
class ScratchDir {
 public:
  ScratchDir(const std::string& prefix, const std::optional<RunAs>& owner);
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The last few KB of a service's log, for error messages.
std::string tail_of(const std::string& path);

// A TCP port on 127.0.0.1 that was free a moment ago and that no other live test process on this
// machine has been handed (tests run in parallel).
int free_loopback_port();

}  // namespace pgoutbox::test
