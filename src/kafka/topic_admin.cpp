#include "pgoutbox/kafka/topic_admin.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "pgoutbox/kafka/producer.h"
#include "pgoutbox/secrets.h"

namespace pgoutbox::kafka {
namespace {

struct QueueDeleter {
  void operator()(rd_kafka_queue_t* q) const { rd_kafka_queue_destroy(q); }
};
struct EventDeleter {
  void operator()(rd_kafka_event_t* e) const { rd_kafka_event_destroy(e); }
};
struct MetadataDeleter {
  void operator()(const rd_kafka_metadata_t* m) const { rd_kafka_metadata_destroy(m); }
};

int millis(std::chrono::milliseconds d) { return static_cast<int>(d.count()); }

// The broker's answers that no later request for the same name can change.
bool definite_refusal(rd_kafka_resp_err_t code) {
  return code == RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION || code == RD_KAFKA_RESP_ERR_POLICY_VIOLATION ||
         code == RD_KAFKA_RESP_ERR_INVALID_CONFIG || code == RD_KAFKA_RESP_ERR_INVALID_REPLICATION_FACTOR ||
         code == RD_KAFKA_RESP_ERR_INVALID_PARTITIONS;
}

}  // namespace

TopicAnswer describe_topic(rd_kafka_t* rk, const std::string& topic, std::chrono::milliseconds timeout) {
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  const rd_kafka_metadata_t* raw = nullptr;
  const auto err = rd_kafka_metadata(rk, 0, rkt, &raw, millis(timeout));
  rd_kafka_topic_destroy(rkt);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return {.error = fmt::format("no metadata: {}", rd_kafka_err2str(err))};
  const std::unique_ptr<const rd_kafka_metadata_t, MetadataDeleter> metadata(raw);
  if (metadata->topic_cnt < 1) return {.error = "the metadata named no topic"};
  const auto& t = metadata->topics[0];
  if (t.err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
    return {.kind = TopicAnswer::Kind::unknown, .partitions = 0, .error = {}};
  if (t.err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED)
    throw std::runtime_error(fmt::format("not authorised to describe topic {}", topic));
  if (t.err != RD_KAFKA_RESP_ERR_NO_ERROR) return {.error = rd_kafka_err2str(t.err)};
  if (t.partition_cnt < 1) return {.error = "the metadata named no partition"};
  return {.kind = TopicAnswer::Kind::exists, .partitions = t.partition_cnt, .error = {}};
}

TopicCreation create_topic(rd_kafka_t* rk, const NewTopic& topic, std::chrono::milliseconds timeout) {
  char err[512];
  // -1 replicas: the broker's default.replication.factor.
  rd_kafka_NewTopic_t* new_topic = rd_kafka_NewTopic_new(topic.name.c_str(), topic.partitions, -1, err, sizeof err);
  if (new_topic == nullptr) return {.error = fmt::format("cannot describe topic {} to create: {}", topic.name, err)};
  for (const auto& [name, value] : topic.config) rd_kafka_NewTopic_set_config(new_topic, name.c_str(), value.c_str());
  const std::unique_ptr<rd_kafka_queue_t, QueueDeleter> queue(rd_kafka_queue_new(rk));
  rd_kafka_AdminOptions_t* options = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
  rd_kafka_AdminOptions_set_request_timeout(options, millis(timeout), err, sizeof err);
  rd_kafka_CreateTopics(rk, &new_topic, 1, options, queue.get());
  rd_kafka_AdminOptions_destroy(options);
  rd_kafka_NewTopic_destroy(new_topic);
  const std::unique_ptr<rd_kafka_event_t, EventDeleter> event(rd_kafka_queue_poll(queue.get(), millis(timeout)));
  if (!event) return {.error = fmt::format("creating topic {} timed out", topic.name)};
  if (rd_kafka_event_error(event.get()) != RD_KAFKA_RESP_ERR_NO_ERROR)
    return {.error = fmt::format("cannot create topic {}: {}", topic.name, rd_kafka_event_error_string(event.get()))};
  size_t count = 0;
  const rd_kafka_topic_result_t** results =
      rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(event.get()), &count);
  for (size_t i = 0; i < count; ++i) {
    const auto code = rd_kafka_topic_result_error(results[i]);
    if (code == RD_KAFKA_RESP_ERR_NO_ERROR) continue;
    if (code == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) return {.kind = TopicCreation::Kind::exists, .error = {}};
    const char* message = rd_kafka_topic_result_error_string(results[i]);
    return {.kind = definite_refusal(code) ? TopicCreation::Kind::refused : TopicCreation::Kind::failed,
            .error = message != nullptr && *message != '\0' ? message : rd_kafka_err2str(code)};
  }
  return {.kind = TopicCreation::Kind::created, .error = {}};
}

rd_kafka_t* admin_client(const std::string& brokers, const std::map<std::string, std::string>& properties,
                         const std::string& role) {
  ProducerSettings settings;
  settings.brokers = brokers;
  settings.properties = properties;
  auto props = effective_properties(settings);
  props.erase("statistics.interval.ms");  // nobody polls them here
  props["client.id"] = props["client.id"] + "-" + role;
  props["enable.idempotence"] = "false";  // it never produces: no producer id to ask for
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (const auto& [name, value] : props) {
    if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      throw std::invalid_argument(redact_secrets(fmt::format("kafka property {}: {}", name, err)));
    }
  }
  // Describing a topic must not create it.
  rd_kafka_conf_set(conf, "allow.auto.create.topics", "false", err, sizeof err);
  rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t*, int, const char*, const char*) {});  // the producer logs
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (rk == nullptr)
    throw std::invalid_argument(redact_secrets(fmt::format("the Kafka client cannot be created: {}", err)));
  return rk;
}

TopicCreation ensure_topic(const std::string& brokers, const std::map<std::string, std::string>& properties,
                           const NewTopic& topic, std::chrono::milliseconds timeout) {
  constexpr auto kAskAgain = std::chrono::milliseconds(250);
  const std::unique_ptr<rd_kafka_t, decltype(&rd_kafka_destroy)> rk(admin_client(brokers, properties, "admin"),
                                                                    &rd_kafka_destroy);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last = "no answer";
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left <= std::chrono::milliseconds::zero()) break;
    TopicAnswer answer;
    try {
      answer = describe_topic(rk.get(), topic.name, left);
    } catch (const std::runtime_error& e) {  // not authorised to describe it
      return {.kind = TopicCreation::Kind::failed, .error = e.what()};
    }
    if (answer.kind == TopicAnswer::Kind::exists) return {.kind = TopicCreation::Kind::exists, .error = {}};
    if (answer.kind == TopicAnswer::Kind::unknown) {
      auto creation = create_topic(rk.get(), topic, std::max(left, std::chrono::milliseconds(1000)));
      if (creation.kind != TopicCreation::Kind::failed) return creation;
      last = creation.error;
    } else {
      last = answer.error;
    }
    std::this_thread::sleep_for(kAskAgain);
  }
  return {.kind = TopicCreation::Kind::failed,
          .error = fmt::format("no definite answer within {} ms ({})", timeout.count(), last)};
}

}  // namespace pgoutbox::kafka
