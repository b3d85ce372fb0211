#pragma once

// Exponential backoff with jitter: one small policy object for every retry loop (reconnects,
// permanent-error retries). Delay n is min·factorⁿ capped at max, then "full jitter" spreads it
// over [delay/2, delay] so that many instances restarting together do not retry in lockstep.

#include <chrono>
#include <cstdint>
#include <random>

namespace pgoutbox {

class Backoff {
 public:
  Backoff(std::chrono::milliseconds min, std::chrono::milliseconds max, double factor, std::uint64_t seed = 0);

  // The delay before the next attempt; each call counts one more failure.
  std::chrono::milliseconds next();
  // A success: the next failure starts again from min.
  void reset() { attempt_ = 0; }
  std::uint32_t attempts() const { return attempt_; }

 private:
  std::chrono::milliseconds min_;
  std::chrono::milliseconds max_;
  double factor_;
  std::uint32_t attempt_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace pgoutbox
