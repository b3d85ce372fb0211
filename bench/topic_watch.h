#pragma once

// Watches how many records a topic holds (the sum of its partitions' high watermarks) with one
// long-lived client, cheap enough to ask every few milliseconds: on a single broker a record is
// below the high watermark once it is acknowledged to an acks=all producer.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>

#include "kafka_client.h"

namespace pgoutbox::bench {

class TopicWatch {
 public:
  TopicWatch(const std::string& bootstrap, std::string topic, int partitions);
  std::int64_t count() const;
  // Polls until the topic holds `target` records; returns when that was first seen, or
  // nullopt after `timeout` or when `still_running` turns false.
  template <class StillRunning>
  std::optional<std::chrono::steady_clock::time_point> wait_for(std::int64_t target, std::chrono::milliseconds timeout,
                                                                StillRunning&& still_running) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (count() >= target) return std::chrono::steady_clock::now();
      if (!still_running()) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::nullopt;
  }

 private:
  test::RdKafkaPtr client_;
  std::string topic_;
  int partitions_;
};

}  // namespace pgoutbox::bench
