#include "retry_schedule.h"

namespace shop {

using namespace std::chrono_literals;

RetrySchedule RetrySchedule::production() { return RetrySchedule({5s, 30s, 2min, 10min}); }

std::optional<std::chrono::milliseconds> RetrySchedule::delay_before_retry(std::size_t retry) const {
  if (retry >= delays_.size()) return std::nullopt;
  return delays_[retry];
}

std::chrono::milliseconds RetrySchedule::total() const {
  std::chrono::milliseconds sum{0};
  for (const auto d : delays_) sum += d;
  return sum;
}

}  // namespace shop
