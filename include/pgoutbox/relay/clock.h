#pragma once

// The relay's time: when it is, and waiting until then. In the daemon, the steady clock and the
// io_context's timers (AsioClock); in the relay's unit tests and the simulator, virtual time that
// moves only when nothing else is left to run (tests/support/virtual_clock.h), so every schedule
// is replayed exactly and no test sleeps.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace pgoutbox::relay {

class Timer {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  virtual ~Timer() = default;
  // Calls `fire` once at `when`, from the io_context's loop, unless cancelled or armed again
  // first: arming replaces the previous wait, whose handler then never runs.
  virtual void at(time_point when, std::function<void()> fire) = 0;
  virtual void cancel() = 0;
};

class Clock {
 public:
  using time_point = Timer::time_point;
  virtual ~Clock() = default;
  virtual time_point now() const = 0;
  virtual std::unique_ptr<Timer> timer() = 0;
  // Runs one handler of `io`, waiting for one (or for the next timer) when none is ready.
  virtual void run_one(boost::asio::io_context& io) = 0;

  // Arms `timer` to fire `delay` from now.
  void after(Timer& timer, std::chrono::nanoseconds delay, std::function<void()> fire) const {
    timer.at(now() + std::chrono::duration_cast<time_point::duration>(delay), std::move(fire));
  }
};

// The wall clock in microseconds since the Unix epoch: what Postgres's commit timestamps are
// compared with (commit-to-ack latency, the stage histograms). Never drives a decision, so the
// simulator's virtual time need not cover it.
std::int64_t wall_us();

// Real time: std::chrono::steady_clock and boost::asio::steady_timer on `io`.
class AsioClock final : public Clock {
 public:
  explicit AsioClock(boost::asio::io_context& io) : io_(io) {}
  time_point now() const override { return std::chrono::steady_clock::now(); }
  std::unique_ptr<Timer> timer() override;
  void run_one(boost::asio::io_context& io) override { io.run_one(); }

 private:
  boost::asio::io_context& io_;
};

}  // namespace pgoutbox::relay
