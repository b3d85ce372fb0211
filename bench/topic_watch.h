#pragma once

// Reads the bench topic the way a consumer of pgoutbox would — isolation.level=read_committed,
// every partition from the beginning — on its own thread while a relay writes it, so every
// contender is timed to the same point: an event visible to a read_committed consumer (for a
// transactional producer that is after its Kafka transaction commits; for the others, after the
// broker's ack). For each event (its sequence number, from the "id" header) it keeps the local
// receive time (CLOCK_REALTIME, the workload's commit clock) and the broker's timestamp, and
// counts duplicates and records that are no event of this run.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kafka_client.h"

namespace pgoutbox::bench {

// What a run delivered: events seen at least once, copies beyond the first, foreign records.
struct Delivery {
  std::int64_t expected = 0;
  std::int64_t distinct = 0;
  std::int64_t duplicates = 0;
  std::int64_t foreign = 0;
  std::int64_t lost() const { return expected - distinct; }
};

// Which of a run's events a topic is to hold, by sequence number (a dead-letter topic holds some,
// the destination the others).
using Belongs = std::function<bool(std::int64_t seq)>;

class TopicWatch {
 public:
  // Expects the events with sequence numbers [0, events) in `topic` (already created); with
  // `belongs`, those of them it holds true for, and an event of the run it holds false for is
  // counted foreign.
  TopicWatch(const std::string& bootstrap, std::string topic, int partitions, std::int64_t events,
             Belongs belongs = {});
  // How many distinct events the topic is to hold.
  std::int64_t expected() const { return delivery_.expected; }
  ~TopicWatch();
  TopicWatch(const TopicWatch&) = delete;
  TopicWatch& operator=(const TopicWatch&) = delete;

  std::int64_t distinct() const { return distinct_.load(std::memory_order_acquire); }
  // Polls until `target` distinct events are visible; returns when that was first seen, or
  // nullopt after `timeout` or when `still_running` turns false.
  template <class StillRunning>
  std::optional<std::chrono::steady_clock::time_point> wait_for(std::int64_t target, std::chrono::milliseconds timeout,
                                                                StillRunning&& still_running) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (distinct() >= target) return std::chrono::steady_clock::now();
      if (!still_running()) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return std::nullopt;
  }
  // Once the writer has stopped: reads on to the end of every partition (so late duplicates are
  // counted), stops the thread and returns the tally. Throws when the end is not reached in time.
  Delivery finish(std::chrono::milliseconds timeout);
  // After finish(), per sequence number: first receive time (µs since the epoch; 0 if never)
  // and the broker's timestamp of that copy (ms).
  const std::vector<std::int64_t>& visible_us() const { return visible_us_; }
  const std::vector<std::int64_t>& broker_ms() const { return broker_ms_; }

 private:
  void run();

  test::RdKafkaPtr consumer_;
  std::string topic_;
  int partitions_;
  Belongs belongs_;
  std::vector<std::int64_t> visible_us_, broker_ms_;
  Delivery delivery_;
  std::atomic<std::int64_t> distinct_{0};
  std::atomic<bool> draining_{false}, stop_{false}, at_end_{false};
  std::thread thread_;
};

}  // namespace pgoutbox::bench
