#pragma once

// Runs a Relay on its own thread and io_context, as the daemon does, so a test can write rows,
// fault services and read Kafka meanwhile.

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "pgoutbox/kafka/topic_limits.h"
#include "pgoutbox/relay/session.h"

namespace pgoutbox::test {

class RelayRunner {
 public:
  // `observer` (may be null) must outlive the runner; it is called on the relay's thread.
  // A session that ends asking for a new one at once (a topic's limit learnt, Outcome::at_once)
  // is followed by a new one sharing the learnt limits and refused records, as the daemon's
  // loop does (app/run_command.cpp), at most kAtOnceRestarts times.
  explicit RelayRunner(config::Config config, relay::Observer* observer = nullptr) : config_(std::move(config)) {
    try {
      options_.topic_limits = kafka::cluster_topic_limits(config_.kafka.brokers, config_.kafka.properties);
    } catch (const std::invalid_argument&) {
      // The session's producer refuses the same properties and says so.
    }
    options_.refused = std::make_shared<relay::RefusedRecords>();
    options_.refused_checkpoints = std::make_shared<relay::RefusedCheckpoints>();
    auto started = std::make_shared<std::promise<void>>();
    auto ready = started->get_future();
    thread_ = std::thread([this, started, observer] {
      for (int restarts = 0;; ++restarts) {
        {
          std::lock_guard lock(mutex_);
          if (restarts > 0 && stop_requested_) break;
          sessions_.push_back(std::make_unique<relay::Session>(config_, observer, options_));
          ++generation_;
        }
        if (restarts == 0) started->set_value();
        outcome_ = current().run();
        if (!outcome_.at_once || restarts >= kAtOnceRestarts) break;
      }
      done_ = true;
    });
    ready.wait();
    // Rows written before the slot exists are not in its stream: wait until it streams.
    while (!done_ && !current().streaming()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~RelayRunner() {
    stop();
    if (thread_.joinable()) thread_.join();
  }

  // Graceful stop (as on SIGTERM); waits for the session to end.
  relay::Outcome stop() {
    relay::Session* session = nullptr;
    {
      std::lock_guard lock(mutex_);
      stop_requested_ = true;  // no session follows this one
      session = sessions_.back().get();
    }
    if (!done_) boost::asio::post(session->io(), [session] { session->stop(); });
    if (thread_.joinable()) thread_.join();
    return outcome_;
  }
  bool done() const { return done_; }
  const relay::Outcome& outcome() const { return outcome_; }
  // Reads a counter of the current session on the relay's thread.
  relay::Counters counters() {
    for (;;) {
      if (done_) {
        if (thread_.joinable()) thread_.join();
        return current().counters();
      }
      const int generation = generation_;
      relay::Session& session = current();
      auto shared = std::make_shared<std::promise<relay::Counters>>();
      auto f = shared->get_future();
      boost::asio::post(session.io(), [&session, shared] { shared->set_value(session.counters()); });
      // A session that ends meanwhile never runs the posted read: then the next one (or the last
      // one's final counters) serves.
      while (f.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
        if (done_ || generation_ != generation) break;
      }
      if (f.wait_for(std::chrono::seconds(0)) == std::future_status::ready) return f.get();
    }
  }

 private:
  static constexpr int kAtOnceRestarts = 5;

  relay::Session& current() {
    std::lock_guard lock(mutex_);
    return *sessions_.back();
  }

  config::Config config_;
  relay::SessionOptions options_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<relay::Session>> sessions_;  // ended ones kept: a posted call may name one
  std::atomic<int> generation_{0};
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> done_{false};
  relay::Outcome outcome_;
  std::thread thread_;
};

}  // namespace pgoutbox::test
