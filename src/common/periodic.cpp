#include "pgoutbox/periodic.h"

#include <spdlog/spdlog.h>

#include <exception>

namespace pgoutbox {

Periodic::Periodic(std::chrono::milliseconds interval, std::function<void()> task, bool run_at_start)
    : interval_(interval), task_(std::move(task)), thread_([this, run_at_start] { loop(run_at_start); }) {}

Periodic::~Periodic() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Periodic::trigger() {
  {
    std::lock_guard lock(mutex_);
    triggered_ = true;
  }
  wake_.notify_all();
}

void Periodic::loop(bool run_at_start) {
  // A task that throws (out of descriptors, out of memory) misses one run; escaping the thread
  // would terminate the process.
  const auto run_once = [this] {
    try {
      task_();
    } catch (const std::exception& e) {
      spdlog::warn("periodic task failed: {}", e.what());
    }
  };
  if (run_at_start) run_once();
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait_for(lock, interval_, [this] { return stopping_ || triggered_; });
    if (stopping_) return;
    triggered_ = false;
    lock.unlock();
    run_once();
    lock.lock();
  }
}

}  // namespace pgoutbox
