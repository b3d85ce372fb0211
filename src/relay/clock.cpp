#include "pgoutbox/relay/clock.h"

#include <boost/asio/steady_timer.hpp>

namespace pgoutbox::relay {

std::int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

class AsioTimer final : public Timer {
 public:
  explicit AsioTimer(boost::asio::io_context& io) : timer_(io), generation_(std::make_shared<std::uint64_t>(0)) {}
  ~AsioTimer() override { ++*generation_; }  // the timer cancels its wait as it goes
  AsioTimer(const AsioTimer&) = delete;
  AsioTimer& operator=(const AsioTimer&) = delete;

  void at(time_point when, std::function<void()> fire) override {
    // A handler already queued when the timer was cancelled or armed again still runs in
    // Asio (with success): the generation it was armed with tells it that it is stale.
    const auto armed = ++*generation_;
    timer_.expires_at(when);
    timer_.async_wait([generation = generation_, armed, fire = std::move(fire)](const boost::system::error_code& ec) {
      if (ec || *generation != armed) return;
      fire();
    });
  }
  void cancel() override {
    ++*generation_;
    timer_.cancel();
  }

 private:
  boost::asio::steady_timer timer_;
  std::shared_ptr<std::uint64_t> generation_;  // outlives the timer in its handlers
};

}  // namespace

std::unique_ptr<Timer> AsioClock::timer() { return std::make_unique<AsioTimer>(io_); }

}  // namespace pgoutbox::relay
