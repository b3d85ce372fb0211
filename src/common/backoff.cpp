#include "pgoutbox/backoff.h"

#include <algorithm>
#include <cmath>

namespace pgoutbox {

Backoff::Backoff(std::chrono::milliseconds min, std::chrono::milliseconds max, double factor, std::uint64_t seed)
    : min_(min),
      max_(std::max(min, max)),
      factor_(std::max(1.0, factor)),
      rng_(seed != 0 ? seed : std::random_device{}()) {}

std::chrono::milliseconds Backoff::next() {
  const double raw = static_cast<double>(min_.count()) * std::pow(factor_, static_cast<double>(attempt_));
  const double capped = std::min(raw, static_cast<double>(max_.count()));
  if (raw < static_cast<double>(max_.count())) ++attempt_;
  std::uniform_real_distribution<double> jitter(0.5, 1.0);
  const auto delay = static_cast<std::int64_t>(std::llround(capped * jitter(rng_)));
  return std::chrono::milliseconds(std::max<std::int64_t>(delay, min_.count() > 0 ? 1 : 0));
}

}  // namespace pgoutbox
