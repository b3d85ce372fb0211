#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>

namespace pgoutbox::test {

// A process's memory as the kernel accounts it (/proc/<pid>/status), in bytes.
struct ProcessMemory {
  std::uint64_t rss = 0;  // VmRSS: resident now
  std::uint64_t hwm = 0;  // VmHWM: the peak resident size since the process started
};

// nullopt once the process is gone.
std::optional<ProcessMemory> read_process_memory(pid_t pid);

// Samples a process's VmRSS on a thread of its own and keeps the maxima: over the whole run and
// over a window the test opens with mark(). VmHWM alone cannot answer "how much while the
// broker was down", because it also counts whatever peak came before.
class RssSampler {
 public:
  explicit RssSampler(std::chrono::milliseconds interval = std::chrono::milliseconds(100));
  ~RssSampler();
  RssSampler(const RssSampler&) = delete;
  RssSampler& operator=(const RssSampler&) = delete;

  // Follows `pid` from now on (a restarted process gets a new pid); 0 stops sampling.
  void follow(pid_t pid);
  // Starts a new window: window_peak() covers samples from here on.
  void mark();
  std::uint64_t window_peak() const { return window_peak_.load(); }
  std::uint64_t overall_peak() const { return overall_peak_.load(); }
  // The last VmHWM read (the kernel's own peak of the followed process).
  std::uint64_t last_hwm() const { return last_hwm_.load(); }
  std::uint64_t last_rss() const { return last_rss_.load(); }

 private:
  void loop();

  std::chrono::milliseconds interval_;
  std::atomic<pid_t> pid_{0};
  std::atomic<std::uint64_t> window_peak_{0};
  std::atomic<std::uint64_t> overall_peak_{0};
  std::atomic<std::uint64_t> last_hwm_{0};
  std::atomic<std::uint64_t> last_rss_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace pgoutbox::test
