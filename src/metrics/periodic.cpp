#include "pgoutbox/metrics/periodic.h"

namespace pgoutbox::metrics {

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

void Periodic::loop(bool run_at_start) {
  if (run_at_start) task_();
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, interval_, [this] { return stopping_; })) {
    lock.unlock();
    task_();
    lock.lock();
  }
}

}  // namespace pgoutbox::metrics
