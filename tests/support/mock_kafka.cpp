#include "mock_kafka.h"

#include <stdexcept>

namespace pgoutbox::test {
namespace {

constexpr int16_t kProduceApiKey = 0;  // ProduceRequest

void check(rd_kafka_resp_err_t err, const std::string& what) {
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    throw std::runtime_error("mock cluster: " + what + ": " + rd_kafka_err2str(err));
}

}  // namespace

MockKafkaCluster::MockKafkaCluster(int brokers)
    : handle_(make_client(RD_KAFKA_PRODUCER, {{"log_level", "3"}})),
      cluster_(rd_kafka_mock_cluster_new(handle_.get(), brokers)) {
  if (cluster_ == nullptr) throw std::runtime_error("rd_kafka_mock_cluster_new failed");
}

MockKafkaCluster::~MockKafkaCluster() { rd_kafka_mock_cluster_destroy(cluster_); }

std::string MockKafkaCluster::bootstrap() const { return rd_kafka_mock_cluster_bootstraps(cluster_); }

void MockKafkaCluster::create_topic(const std::string& topic, int partitions, int replication_factor) {
  check(rd_kafka_mock_topic_create(cluster_, topic.c_str(), partitions, replication_factor), "create topic " + topic);
}

void MockKafkaCluster::set_leader(const std::string& topic, int partition, int broker) {
  check(rd_kafka_mock_partition_set_leader(cluster_, topic.c_str(), partition, broker), "set leader");
}

void MockKafkaCluster::set_topic_error(const std::string& topic, rd_kafka_resp_err_t error) {
  rd_kafka_mock_topic_set_error(cluster_, topic.c_str(), error);
}

void MockKafkaCluster::fail_produce(const std::vector<rd_kafka_resp_err_t>& errors) {
  rd_kafka_mock_push_request_errors_array(cluster_, kProduceApiKey, errors.size(), errors.data());
}

void MockKafkaCluster::fail_produce_on(int broker,
                                       const std::vector<std::pair<rd_kafka_resp_err_t, int>>& errors_and_rtts) {
  // The variadic API takes (error, rtt) tuples; push them one at a time.
  for (const auto& [err, rtt] : errors_and_rtts) {
    check(rd_kafka_mock_broker_push_request_error_rtts(cluster_, broker, kProduceApiKey, 1, err, rtt), "push error");
  }
}

std::size_t MockKafkaCluster::pending_produce_errors(int broker) const {
  size_t count = 0;
  check(rd_kafka_mock_broker_error_stack_cnt(cluster_, broker, kProduceApiKey, &count), "error stack count");
  return count;
}

void MockKafkaCluster::clear_produce_errors() { rd_kafka_mock_clear_request_errors(cluster_, kProduceApiKey); }

void MockKafkaCluster::set_down(int broker) { check(rd_kafka_mock_broker_set_down(cluster_, broker), "set down"); }

void MockKafkaCluster::set_up(int broker) { check(rd_kafka_mock_broker_set_up(cluster_, broker), "set up"); }

}  // namespace pgoutbox::test
