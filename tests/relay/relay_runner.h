#pragma once

// Runs a Relay on its own thread and io_context, as the daemon does, so a test can write rows,
// fault services and read Kafka meanwhile.

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <future>
#include <thread>

#include "pgoutbox/relay/session.h"

namespace pgoutbox::test {

class RelayRunner {
 public:
  // `observer` (may be null) must outlive the runner; it is called on the relay's thread.
  explicit RelayRunner(config::Config config, relay::Observer* observer = nullptr) : config_(std::move(config)) {
    auto started = std::make_shared<std::promise<void>>();
    auto ready = started->get_future();
    thread_ = std::thread([this, started, observer] {
      relay_ = std::make_unique<relay::Session>(config_, observer);
      started->set_value();
      outcome_ = relay_->run();
      done_ = true;
    });
    ready.wait();
    // Rows written before the slot exists are not in its stream: wait until it streams.
    while (!done_ && !relay_->streaming()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~RelayRunner() {
    stop();
    if (thread_.joinable()) thread_.join();
  }

  // Graceful stop (as on SIGTERM); waits for the session to end.
  relay::Outcome stop() {
    if (!done_) boost::asio::post(relay_->io(), [this] { relay_->stop(); });
    if (thread_.joinable()) thread_.join();
    return outcome_;
  }
  bool done() const { return done_; }
  const relay::Outcome& outcome() const { return outcome_; }
  // Reads a counter on the relay's thread.
  relay::Counters counters() {
    if (done_) return relay_->counters();
    auto shared = std::make_shared<std::promise<relay::Counters>>();
    auto f = shared->get_future();
    boost::asio::post(relay_->io(), [this, shared] { shared->set_value(relay_->counters()); });
    // A session that ends meanwhile never runs the posted read: then its final counters serve.
    while (f.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
      if (done_) {
        if (thread_.joinable()) thread_.join();
        return relay_->counters();
      }
    }
    return f.get();
  }

 private:
  config::Config config_;
  std::unique_ptr<relay::Session> relay_;
  std::atomic<bool> done_{false};
  relay::Outcome outcome_;
  std::thread thread_;
};

}  // namespace pgoutbox::test
