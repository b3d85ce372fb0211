#include "stop_signal.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <thread>

namespace shop {

namespace {

std::atomic<bool> stop_flag{false};

extern "C" void on_stop_signal(int) { stop_flag.store(true); }

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool stop_requested() { return stop_flag.load(); }

bool sleep_unless_stopped(std::chrono::milliseconds duration) {
  const auto until = std::chrono::steady_clock::now() + duration;
  while (!stop_requested()) {
    const auto left = until - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return true;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(left, std::chrono::milliseconds(50)));
  }
  return false;
}

}  // namespace shop
