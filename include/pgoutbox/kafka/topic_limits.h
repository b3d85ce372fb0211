#pragma once

// What each destination topic accepts (docs/spec.md I13, docs/operating.md "Topic limits"): its
// max.message.bytes, the largest record batch the broker takes for it, and whether it is
// compacted (the broker refuses a record without a key there). Read with DescribeConfigs the
// first time a topic is produced to (templates make topics dynamic) and kept for the process's
// life; a topic that does not exist yet gets the broker's message.max.bytes, the default the
// broker creates it with, and is asked again a second later until the broker knows it (a topic
// created a moment ago, or by its first record, has its own figures then). librdkafka fills batches up to batch.size
// and the broker refuses a whole batch above the limit, so the producers keep batch.size under the smallest limit known
// (batch_size_under below); a limit read again after such a refusal may be lower.

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace pgoutbox::kafka {

// Kafka's own default for max.message.bytes (and the broker's message.max.bytes).
inline constexpr std::size_t kKafkaDefaultMaxMessageBytes = 1'048'588;

struct TopicLimit {
  std::size_t max_message_bytes = kKafkaDefaultMaxMessageBytes;
  bool compacted = false;
  // Where the figures come from: the topic's own configuration, the broker's default (the topic
  // does not exist yet), or Kafka's defaults (the cluster did not answer, or refused
  // DescribeConfigs): an unread limit is read again a minute later.
  enum class Source { topic, broker, assumed };
  Source source = Source::assumed;
};

class TopicLimits {
 public:
  virtual ~TopicLimits() = default;
  // `topic`'s limit: read on its first use (a request of at most a few seconds), cached after.
  const TopicLimit& of(const std::string& topic);
  // Reads `topic` again at its next use: Kafka refused a batch of it for its size.
  void forget(const std::string& topic) { cache_.erase(topic); }
  // The smallest max.message.bytes of the topics read so far; nullopt before the first.
  std::optional<std::size_t> smallest() const;

 protected:
  virtual TopicLimit read(const std::string& topic) = 0;
  virtual std::chrono::steady_clock::time_point now() const { return std::chrono::steady_clock::now(); }

 private:
  struct Entry {
    TopicLimit limit;
    std::chrono::steady_clock::time_point read_at;
  };
  std::map<std::string, Entry> cache_;
};

// The batch.size that keeps every batch of a producer writing topics limited to `limit` bytes
// below it (batch.size counts the batch's framing; a margin covers the request's own).
std::size_t batch_size_under(std::size_t limit);

// Limits read from the cluster with a client of the producer's effective properties (TLS, SASL).
// Throws std::invalid_argument when the properties are refused (the producer would be too).
std::shared_ptr<TopicLimits> cluster_topic_limits(const std::string& brokers,
                                                  const std::map<std::string, std::string>& properties);

// Limits fixed in advance, for tests and the simulator: `limits` by topic, `fallback` for others.
class FixedTopicLimits final : public TopicLimits {
 public:
  explicit FixedTopicLimits(std::map<std::string, TopicLimit> limits, TopicLimit fallback = {})
      : limits_(std::move(limits)), fallback_(fallback) {}
  void set(const std::string& topic, TopicLimit limit) { limits_[topic] = limit; }
  int reads() const { return reads_; }
  // Moves this object's clock on (of() reads limits again after their interval).
  void advance(std::chrono::milliseconds by) { elapsed_ += by; }

 protected:
  TopicLimit read(const std::string& topic) override;
  std::chrono::steady_clock::time_point now() const override {
    return std::chrono::steady_clock::time_point{} + elapsed_;
  }

 private:
  std::map<std::string, TopicLimit> limits_;
  TopicLimit fallback_;
  int reads_ = 0;
  std::chrono::milliseconds elapsed_{0};
};

}  // namespace pgoutbox::kafka
