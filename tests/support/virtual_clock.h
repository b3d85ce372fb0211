#pragma once

// Virtual time for the relay (relay/clock.h): time moves only when the io_context has nothing
// ready, and then straight to the next timer, so a test never sleeps and a schedule runs the
// same way every time. Timers that come due at the same moment fire in the order they were armed.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "pgoutbox/relay/clock.h"

namespace pgoutbox::test {

class VirtualClock final : public relay::Clock {
 public:
  // Thrown by run_one when nothing is left to run: in real time the relay would wait forever.
  // Not a std::exception, so that the relay's own error handling does not take it for one of its
  // failures: it ends the run it interrupts.
  struct Idle {};

  time_point now() const override { return now_; }

  std::unique_ptr<relay::Timer> timer() override { return std::make_unique<VirtualTimer>(*this); }

  void run_one(boost::asio::io_context& io) override {
    if (io.poll_one() > 0) return;
    if (!fire_next()) throw Idle();
  }

  // Fires the earliest armed timer, moving time to it; false when none is armed.
  bool fire_next() {
    while (!due_.empty()) {
      auto node = due_.extract(due_.begin());
      auto& entry = node.mapped();
      if (*entry.generation != entry.armed) continue;  // cancelled or armed again since
      ++*entry.generation;
      if (node.key().first > now_) now_ = node.key().first;
      entry.fire();
      return true;
    }
    return false;
  }
  // When the earliest armed timer fires; time_point::max() when none is armed.
  time_point next_due() {
    while (!due_.empty() && *due_.begin()->second.generation != due_.begin()->second.armed) due_.erase(due_.begin());
    return due_.empty() ? time_point::max() : due_.begin()->first.first;
  }
  // A callback of the test's own (a simulated broker's report, a step of a script) at `when`.
  void schedule(time_point when, std::function<void()> fire) {
    auto generation = std::make_shared<std::uint64_t>(0);
    arm(generation, when, std::move(fire));
  }
  void schedule_after(std::chrono::nanoseconds delay, std::function<void()> fire) {
    schedule(now_ + std::chrono::duration_cast<time_point::duration>(delay), std::move(fire));
  }
  // A callback of the world outside the relay's thread (a broker writing what a producer sent,
  // librdkafka's threads readying its reports): it also fires while the relay's thread is blocked.
  void schedule_world(time_point when, std::function<void()> fire) {
    arm(std::make_shared<std::uint64_t>(0), when, std::move(fire), true);
  }

  // The relay's thread is blocked in a call (one of librdkafka's transactional calls) for at most
  // `limit`: only the world's callbacks (schedule_world) fire meanwhile, and `done`, asked before
  // and after each, ends the call early (its answer came). The relay's timers and every other
  // callback due meanwhile fire after the call returns, late, as they would in the daemon.
  // Returns done().
  bool block(std::chrono::nanoseconds limit, const std::function<bool()>& done) {
    const auto until = now_ + std::chrono::duration_cast<time_point::duration>(limit);
    while (!done()) {
      auto it = due_.begin();
      while (it != due_.end() && it->first.first <= until &&
             (!it->second.world || *it->second.generation != it->second.armed)) {
        ++it;
      }
      if (it == due_.end() || it->first.first > until) {
        now_ = std::max(now_, until);
        return done();
      }
      auto node = due_.extract(it);
      ++*node.mapped().generation;
      if (node.key().first > now_) now_ = node.key().first;
      node.mapped().fire();
    }
    return true;
  }

 private:
  struct Entry {
    std::shared_ptr<std::uint64_t> generation;
    std::uint64_t armed;
    std::function<void()> fire;
    bool world = false;  // fires while the relay's thread is blocked (schedule_world)
  };

  class VirtualTimer final : public relay::Timer {
   public:
    explicit VirtualTimer(VirtualClock& clock) : clock_(clock), generation_(std::make_shared<std::uint64_t>(0)) {}
    ~VirtualTimer() override { cancel(); }
    VirtualTimer(const VirtualTimer&) = delete;
    VirtualTimer& operator=(const VirtualTimer&) = delete;
    void at(time_point when, std::function<void()> fire) override { clock_.arm(generation_, when, std::move(fire)); }
    void cancel() override { ++*generation_; }

   private:
    VirtualClock& clock_;
    std::shared_ptr<std::uint64_t> generation_;
  };

  void arm(const std::shared_ptr<std::uint64_t>& generation, time_point when, std::function<void()> fire,
           bool world = false) {
    const auto armed = ++*generation;
    due_.emplace(std::make_pair(std::max(when, now_), next_sequence_++),
                 Entry{generation, armed, std::move(fire), world});
  }

  // Starts far from zero so that "now minus a delay" never goes below the epoch.
  time_point now_ = time_point(std::chrono::hours(24));
  std::uint64_t next_sequence_ = 0;
  std::map<std::pair<time_point, std::uint64_t>, Entry> due_;
};

}  // namespace pgoutbox::test
