#include "process_memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace pgoutbox::test {
namespace {

// "VmRSS:	   12345 kB" → bytes.
std::uint64_t kib_field(const std::string& line) {
  std::istringstream in(line.substr(line.find(':') + 1));
  std::uint64_t kib = 0;
  in >> kib;
  return kib * 1024;
}

void raise_to(std::atomic<std::uint64_t>& peak, std::uint64_t value) {
  std::uint64_t seen = peak.load();
  while (value > seen && !peak.compare_exchange_weak(seen, value)) {}
}

}  // namespace

std::optional<ProcessMemory> read_process_memory(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  if (!status) return std::nullopt;
  ProcessMemory memory;
  bool found = false;
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) {
      memory.rss = kib_field(line);
      found = true;
    } else if (line.rfind("VmHWM:", 0) == 0) {
      memory.hwm = kib_field(line);
    }
  }
  // A zombie has no VmRSS line: it holds no memory any more.
  if (!found) return std::nullopt;
  return memory;
}

RssSampler::RssSampler(std::chrono::milliseconds interval) : interval_(interval), thread_([this] { loop(); }) {}

RssSampler::~RssSampler() {
  stop_ = true;
  thread_.join();
}

void RssSampler::follow(pid_t pid) { pid_ = pid; }

void RssSampler::mark() { window_peak_ = 0; }

void RssSampler::loop() {
  while (!stop_) {
    if (const pid_t pid = pid_.load(); pid > 0) {
      if (const auto memory = read_process_memory(pid)) {
        last_rss_ = memory->rss;
        last_hwm_ = memory->hwm;
        raise_to(window_peak_, memory->rss);
        raise_to(overall_peak_, memory->rss);
      }
    }
    std::this_thread::sleep_for(interval_);
  }
}

}  // namespace pgoutbox::test
