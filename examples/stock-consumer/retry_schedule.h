#pragma once

#include <chrono>
#include <optional>
#include <vector>

namespace shop {

// The waits between attempts at a transiently failing step. The seeds' production schedule is
// 5 s, 30 s, 2 min, 10 min, then give up (the record goes to the dead-letter topic and the
// reconciliation reports its order); demos and tests pass a scaled-down list.
class RetrySchedule {
 public:
  explicit RetrySchedule(std::vector<std::chrono::milliseconds> delays) : delays_(std::move(delays)) {}
  static RetrySchedule production();

  // The wait before retry number `retry` (0 = the first retry); nullopt once used up.
  std::optional<std::chrono::milliseconds> delay_before_retry(std::size_t retry) const;
  // All waits together: the longest a single record can keep the consumer busy.
  std::chrono::milliseconds total() const;

 private:
  std::vector<std::chrono::milliseconds> delays_;
};

}  // namespace shop
