#pragma once

// Runs a task on a thread of its own now and then every interval, until destroyed. The wait is
// interruptible, so destruction takes at most as long as one run of the task.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace pgoutbox::metrics {

class Periodic {
 public:
  Periodic(std::chrono::milliseconds interval, std::function<void()> task, bool run_at_start = true);
  ~Periodic();
  Periodic(const Periodic&) = delete;
  Periodic& operator=(const Periodic&) = delete;

 private:
  void loop(bool run_at_start);

  std::chrono::milliseconds interval_;
  std::function<void()> task_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace pgoutbox::metrics
