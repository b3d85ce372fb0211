#include "topic_reader.h"

#include <fmt/format.h>
#include <librdkafka/rdkafka.h>

#include <memory>
#include <stdexcept>
#include <vector>

namespace shop {

namespace {

struct KafkaDeleter {
  void operator()(rd_kafka_t* rk) const {
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
  }
};
using Consumer = std::unique_ptr<rd_kafka_t, KafkaDeleter>;

void set(rd_kafka_conf_t* conf, const char* name, const std::string& value) {
  char error[512];
  if (rd_kafka_conf_set(conf, name, value.c_str(), error, sizeof error) != RD_KAFKA_CONF_OK) {
    rd_kafka_conf_destroy(conf);
    throw std::runtime_error(std::string("kafka property ") + name + ": " + error);
  }
}

Consumer open_consumer(const std::string& brokers) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  set(conf, "bootstrap.servers", brokers);
  set(conf, "group.id", "reconcile");  // partitions are assigned, never subscribed: no group is joined
  set(conf, "enable.auto.commit", "false");
  set(conf, "isolation.level", "read_committed");
  set(conf, "enable.partition.eof", "true");
  char error[512];
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, error, sizeof error);
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    throw std::runtime_error(std::string("kafka consumer: ") + error);
  }
  rd_kafka_poll_set_consumer(rk);
  return Consumer(rk);
}

int partition_count(rd_kafka_t* rk, const std::string& topic, std::chrono::milliseconds timeout) {
  rd_kafka_topic_t* handle = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  const rd_kafka_metadata_t* metadata = nullptr;
  const auto error = rd_kafka_metadata(rk, 0, handle, &metadata, static_cast<int>(timeout.count()));
  rd_kafka_topic_destroy(handle);
  if (error != RD_KAFKA_RESP_ERR_NO_ERROR)
    throw std::runtime_error("metadata of " + topic + ": " + rd_kafka_err2str(error));
  const int count = metadata->topic_cnt == 1 && metadata->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR
                        ? metadata->topics[0].partition_cnt
                        : 0;
  rd_kafka_metadata_destroy(metadata);
  if (count == 0) throw std::runtime_error("topic " + topic + " does not exist");
  return count;
}

std::string header(const rd_kafka_message_t* message, const char* name, bool& present) {
  rd_kafka_headers_t* headers = nullptr;
  const void* value = nullptr;
  std::size_t size = 0;
  present = rd_kafka_message_headers(message, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR &&
            rd_kafka_header_get_last(headers, name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
  return present && value != nullptr ? std::string(static_cast<const char*>(value), size) : std::string();
}

void count(const rd_kafka_message_t* message, std::map<std::string, Copies>& copies) {
  bool present = false;
  Copies& c = copies[header(message, "id", present)];
  if (header(message, "relay", present) == "outbox-poller") {
    ++c.poller;
  } else {
    header(message, "pgoutbox.lsn", present);
    ++(present ? c.stream : c.backfill);
  }
}

}  // namespace

std::map<std::string, Copies> read_copies(const std::string& brokers, const std::string& topic,
                                          std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Consumer consumer = open_consumer(brokers);
  rd_kafka_t* rk = consumer.get();
  // Each partition's end when reading begins; a partition is read when its position reaches it
  // (positions, not the last offset seen: a transaction's control record takes an offset too).
  std::map<int, std::int64_t> ends;
  rd_kafka_topic_partition_list_t* assignment = rd_kafka_topic_partition_list_new(1);
  for (int p = 0; p < partition_count(rk, topic, timeout); ++p) {
    std::int64_t low = 0, high = 0;
    const auto error =
        rd_kafka_query_watermark_offsets(rk, topic.c_str(), p, &low, &high, static_cast<int>(timeout.count()));
    if (error != RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_topic_partition_list_destroy(assignment);
      throw std::runtime_error("end offsets of " + topic + ": " + rd_kafka_err2str(error));
    }
    if (high <= low) continue;
    ends[p] = high;
    rd_kafka_topic_partition_list_add(assignment, topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  }
  rd_kafka_assign(rk, assignment);
  rd_kafka_topic_partition_list_destroy(assignment);

  std::map<std::string, Copies> copies;
  while (!ends.empty()) {
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("timed out reading " + topic);
    rd_kafka_message_t* message = rd_kafka_consumer_poll(rk, 200);
    if (message == nullptr) continue;
    const auto error = message->err;
    const int partition = message->partition;
    const std::int64_t next = message->offset + 1;
    if (error == RD_KAFKA_RESP_ERR_NO_ERROR) count(message, copies);
    const std::string reason = error == RD_KAFKA_RESP_ERR_NO_ERROR || error == RD_KAFKA_RESP_ERR__PARTITION_EOF
                                   ? std::string()
                                   : rd_kafka_message_errstr(message);
    rd_kafka_message_destroy(message);
    if (!reason.empty()) throw std::runtime_error(fmt::format("reading {}: {}", topic, reason));
    const auto end = ends.find(partition);
    if (end != ends.end() && (error == RD_KAFKA_RESP_ERR__PARTITION_EOF || next >= end->second)) ends.erase(end);
  }
  return copies;
}

}  // namespace shop
