#include "pgoutbox/kafka/topic_limits.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "pgoutbox/kafka/describe_configs.h"
#include "pgoutbox/kafka/topic_admin.h"

namespace pgoutbox::kafka {
namespace {

using namespace std::chrono_literals;

// A limit that could not be read is asked again after this long.
constexpr auto kUnreadRetry = 60s;
// A topic the broker did not know is asked again after this long: it may have been created a
// moment ago (the broker serves a new topic only once it has replayed the controller's record),
// or be created by the first record produced to it; its own limit and policy then replace the
// broker's default.
constexpr auto kUnknownRetry = 1s;
constexpr auto kRequestTimeout = 3s;
// What a produce request adds around a batch (its header, the topic and partition), and some.
constexpr std::size_t kRequestMargin = 512;

std::optional<std::size_t> number(const std::map<std::string, std::string>& entries, const std::string& name) {
  const auto it = entries.find(name);
  if (it == entries.end()) return std::nullopt;
  std::size_t value = 0;
  const auto* end = it->second.data() + it->second.size();
  if (const auto [ptr, ec] = std::from_chars(it->second.data(), end, value); ec != std::errc() || ptr != end) {
    return std::nullopt;
  }
  return value;
}

class ClusterTopicLimits final : public TopicLimits {
 public:
  explicit ClusterTopicLimits(rd_kafka_t* rk) : rk_(rk) {}
  ~ClusterTopicLimits() override { rd_kafka_destroy(rk_); }
  ClusterTopicLimits(const ClusterTopicLimits&) = delete;
  ClusterTopicLimits& operator=(const ClusterTopicLimits&) = delete;

 protected:
  TopicLimit read(const std::string& topic) override {
    TopicLimit limit;
    const auto described = describe_config(rk_, RD_KAFKA_RESOURCE_TOPIC, topic, kRequestTimeout);
    if (described.ok()) {
      if (const auto bytes = number(described.entries, "max.message.bytes")) {
        limit.max_message_bytes = *bytes;
        limit.source = TopicLimit::Source::topic;
      }
      if (const auto it = described.entries.find("cleanup.policy"); it != described.entries.end())
        limit.compacted = it->second.find("compact") != std::string::npos;
      return limit;
    }
    if (described.error == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
      if (const auto bytes = broker_default()) {
        limit.max_message_bytes = *bytes;
        limit.source = TopicLimit::Source::broker;
      }
      return limit;
    }
    spdlog::warn(
        "topic {}: its max.message.bytes and cleanup.policy could not be read ({}); Kafka's defaults are assumed "
        "until they can be (grant pgoutbox's principal DESCRIBE_CONFIGS on the topic)",
        topic, rd_kafka_err2str(described.error));
    return limit;
  }

 private:
  // The broker's message.max.bytes: what a topic the broker creates on first use gets. Read once.
  std::optional<std::size_t> broker_default() {
    if (!broker_default_) broker_default_ = read_broker_default();
    return broker_default_;
  }

  std::optional<std::size_t> read_broker_default() {
    const rd_kafka_metadata_t* md = nullptr;
    if (rd_kafka_metadata(rk_, 0, nullptr, &md, static_cast<int>(kRequestTimeout.count() * 1000)) !=
            RD_KAFKA_RESP_ERR_NO_ERROR ||
        md == nullptr) {
      return std::nullopt;
    }
    const int broker = md->broker_cnt > 0 ? md->brokers[0].id : -1;
    rd_kafka_metadata_destroy(md);
    if (broker < 0) return std::nullopt;
    const auto described = describe_config(rk_, RD_KAFKA_RESOURCE_BROKER, std::to_string(broker), kRequestTimeout);
    return described.ok() ? number(described.entries, "message.max.bytes") : std::nullopt;
  }

  rd_kafka_t* rk_;
  std::optional<std::size_t> broker_default_;
};

}  // namespace

const TopicLimit& TopicLimits::of(const std::string& topic) {
  // Once per record: a topic's own figures are final, the clock is read only for the others.
  auto it = cache_.find(topic);
  if (it != cache_.end() && it->second.limit.source == TopicLimit::Source::topic) return it->second.limit;
  const auto now = this->now();
  if (it != cache_.end()) {
    const auto retry = it->second.limit.source == TopicLimit::Source::broker ? kUnknownRetry : kUnreadRetry;
    if (now - it->second.read_at < retry) return it->second.limit;
  }
  const auto limit = read(topic);
  if (it == cache_.end() || it->second.limit.max_message_bytes != limit.max_message_bytes ||
      it->second.limit.compacted != limit.compacted) {
    spdlog::info("topic {}: max.message.bytes {}{} ({})", topic, limit.max_message_bytes,
                 limit.compacted ? ", compacted" : "",
                 limit.source == TopicLimit::Source::topic    ? "the topic's configuration"
                 : limit.source == TopicLimit::Source::broker ? "the broker's default: the topic does not exist yet"
                                                              : "Kafka's default: not read");
  }
  auto& entry = cache_[topic];
  entry = Entry{limit, now};
  return entry.limit;
}

std::optional<std::size_t> TopicLimits::smallest() const {
  std::optional<std::size_t> smallest;
  for (const auto& [topic, entry] : cache_) {
    smallest = std::min(smallest.value_or(entry.limit.max_message_bytes), entry.limit.max_message_bytes);
  }
  return smallest;
}

// librdkafka's batch.size counts the batch's framing and includes one more record only while the
// batch stays within it (a record larger than batch.size goes alone). A limit of less than twice
// the margin keeps half of itself: a batch of several records stays under even a tiny limit, and
// a record over the limit alone meets poison.policy before it is sent.
std::size_t batch_size_under(std::size_t limit) {
  if (limit > 2 * kRequestMargin) return limit - kRequestMargin;
  return std::max<std::size_t>(1, limit / 2);
}

std::shared_ptr<TopicLimits> cluster_topic_limits(const std::string& brokers,
                                                  const std::map<std::string, std::string>& properties) {
  return std::make_shared<ClusterTopicLimits>(admin_client(brokers, properties, "limits"));
}

TopicLimit FixedTopicLimits::read(const std::string& topic) {
  ++reads_;
  const auto it = limits_.find(topic);
  return it == limits_.end() ? fallback_ : it->second;
}

}  // namespace pgoutbox::kafka
