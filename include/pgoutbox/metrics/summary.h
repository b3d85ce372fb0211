#pragma once

// The periodic one-line summary in the log (every 30 s in `run`): published events per second
// since the previous line, in-flight events and bytes, replication lag, confirmed LSN.

#include <chrono>
#include <cstdint>
#include <string>

#include "pgoutbox/metrics/relay_probe.h"
#include "pgoutbox/metrics/slot_probe.h"

namespace pgoutbox::metrics {

class Summary {
 public:
  Summary(const RelayProbe& relay, const SlotProbe& slot);

  // The line for the time since the previous call (or since construction).
  std::string next_line(std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());

 private:
  const RelayProbe& relay_;
  const SlotProbe& slot_;
  std::chrono::steady_clock::time_point last_time_;
  std::uint64_t last_published_;
  std::uint64_t last_received_;
};

}  // namespace pgoutbox::metrics
