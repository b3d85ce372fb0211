#pragma once

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <string>
#include <utility>
#include <vector>

#include "kafka_client.h"

namespace pgoutbox::test {

// librdkafka's mock cluster (rdkafka_mock.h, from the linked librdkafka), living in the test process on
// loopback ports: other processes (pgoutbox) reach it through bootstrap(). It serves
// metadata, the idempotent producer (InitProducerId, sequence checks) and fetches, and injects
// errors a real broker cannot give on cue. The mock is experimental API, so every use goes
// through this class.
class MockKafkaCluster {
 public:
  explicit MockKafkaCluster(int brokers);
  ~MockKafkaCluster();
  MockKafkaCluster(const MockKafkaCluster&) = delete;
  MockKafkaCluster& operator=(const MockKafkaCluster&) = delete;

  std::string bootstrap() const;

  void create_topic(const std::string& topic, int partitions, int replication_factor);
  void set_leader(const std::string& topic, int partition, int broker);
  // Metadata requests naming the topic answer with `error` (NO_ERROR: as the topic is again).
  void set_topic_error(const std::string& topic, rd_kafka_resp_err_t error);

  // The next Produce requests to any broker fail with these errors, in order.
  // RD_KAFKA_RESP_ERR__TRANSPORT makes the broker close the connection instead of answering.
  void fail_produce(const std::vector<rd_kafka_resp_err_t>& errors);
  // The next Produce requests to `broker` answer with (error, delay in ms), in order.
  void fail_produce_on(int broker, const std::vector<std::pair<rd_kafka_resp_err_t, int>>& errors_and_rtts);
  // Produce errors still queued for `broker` (they are used up as requests arrive).
  std::size_t pending_produce_errors(int broker) const;
  // Drops the Produce errors still queued on the cluster's stack (fail_produce).
  void clear_produce_errors();

  // The broker drops its connections and refuses new ones / accepts them again.
  void set_down(int broker);
  void set_up(int broker);

 private:
  RdKafkaPtr handle_;  // the mock cluster needs a client instance for its bookkeeping
  rd_kafka_mock_cluster_t* cluster_ = nullptr;
};

}  // namespace pgoutbox::test
