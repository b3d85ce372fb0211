#include "topic_watch.h"

#include <stdexcept>

#include "workload.h"

namespace pgoutbox::bench {

TopicWatch::TopicWatch(const std::string& bootstrap, std::string topic, int partitions, std::int64_t events,
                       Belongs belongs)
    : consumer_(test::make_client(RD_KAFKA_CONSUMER, {{"bootstrap.servers", bootstrap},
                                                      {"group.id", "pgoutbox-bench-watch"},
                                                      {"enable.auto.commit", "false"},
                                                      {"enable.partition.eof", "true"},
                                                      {"isolation.level", "read_committed"},
                                                      {"fetch.wait.max.ms", "5"},
                                                      {"allow.auto.create.topics", "false"}})),
      topic_(std::move(topic)),
      partitions_(partitions),
      belongs_(std::move(belongs)),
      visible_us_(static_cast<std::size_t>(events), 0),
      broker_ms_(static_cast<std::size_t>(events), 0) {
  delivery_.expected = events;
  if (belongs_) {
    delivery_.expected = 0;
    for (std::int64_t seq = 0; seq < events; ++seq) delivery_.expected += belongs_(seq) ? 1 : 0;
  }
  std::unique_ptr<rd_kafka_topic_partition_list_t, decltype(&rd_kafka_topic_partition_list_destroy)> assignment(
      rd_kafka_topic_partition_list_new(partitions_), &rd_kafka_topic_partition_list_destroy);
  for (int p = 0; p < partitions_; ++p) {
    rd_kafka_topic_partition_list_add(assignment.get(), topic_.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  }
  if (rd_kafka_assign(consumer_.get(), assignment.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    throw std::runtime_error("cannot assign the partitions of " + topic_);
  }
  thread_ = std::thread([this] { run(); });
}

TopicWatch::~TopicWatch() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  rd_kafka_consumer_close(consumer_.get());
}

void TopicWatch::run() {
  std::vector<bool> at_end(static_cast<std::size_t>(partitions_), false);
  int ends = 0;
  const auto events = static_cast<std::int64_t>(visible_us_.size());
  while (!stop_) {
    rd_kafka_message_t* msg = rd_kafka_consumer_poll(consumer_.get(), 50);
    if (msg != nullptr) {
      const auto p = static_cast<std::size_t>(msg->partition);
      if (msg->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        if (!at_end[p]) ++ends;
        at_end[p] = true;
      } else if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const std::int64_t now = realtime_us();
        if (at_end[p]) --ends;
        at_end[p] = false;
        rd_kafka_headers_t* headers = nullptr;
        const void* value = nullptr;
        std::size_t size = 0;
        std::optional<std::int64_t> seq;
        if (rd_kafka_message_headers(msg, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR &&
            rd_kafka_header_get_last(headers, "id", &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR) {
          seq = seq_of_event_id(std::string_view(static_cast<const char*>(value), size));
        }
        if (!seq || *seq < 0 || *seq >= events || (belongs_ && !belongs_(*seq))) {
          ++delivery_.foreign;
        } else if (visible_us_[static_cast<std::size_t>(*seq)] != 0) {
          ++delivery_.duplicates;
        } else {
          visible_us_[static_cast<std::size_t>(*seq)] = now;
          broker_ms_[static_cast<std::size_t>(*seq)] = rd_kafka_message_timestamp(msg, nullptr);
          distinct_.fetch_add(1, std::memory_order_release);
        }
      }
      rd_kafka_message_destroy(msg);
    }
    // The writer has stopped, so no transaction is open and every partition's end is final.
    if (draining_ && ends == partitions_) {
      at_end_ = true;
      return;
    }
  }
}

Delivery TopicWatch::finish(std::chrono::milliseconds timeout) {
  draining_ = true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!at_end_ && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop_ = true;
  thread_.join();
  if (!at_end_) throw std::runtime_error("did not read " + topic_ + " to its end in time");
  delivery_.distinct = distinct();
  return delivery_;
}

}  // namespace pgoutbox::bench
