#pragma once

// Runs a task on a thread of its own now and then every interval, until destroyed, and soon
// after trigger() between two intervals. The wait is interruptible, so destruction takes at most
// as long as one run of the task.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace pgoutbox {

class Periodic {
 public:
  Periodic(std::chrono::milliseconds interval, std::function<void()> task, bool run_at_start = true);
  ~Periodic();
  Periodic(const Periodic&) = delete;
  Periodic& operator=(const Periodic&) = delete;

  // Runs the task once more as soon as the thread is free; triggers before it runs count once.
  // Any thread may call it.
  void trigger();

 private:
  void loop(bool run_at_start);

  std::chrono::milliseconds interval_;
  std::function<void()> task_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool triggered_ = false;
  std::thread thread_;
};

}  // namespace pgoutbox
