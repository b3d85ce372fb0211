#include "kafka_client.h"

#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

namespace pgoutbox::test {
namespace {

struct LogSink {
  std::function<void(const std::string&, const std::string&)> fn;
};

// Sinks live as long as the process: test clients are few, and librdkafka may log until its
// handle is destroyed.
LogSink* keep_sink(LogSink sink) {
  static std::mutex mutex;
  static std::deque<LogSink> sinks;
  std::lock_guard lock(mutex);
  return &sinks.emplace_back(std::move(sink));
}

void log_trampoline(const rd_kafka_t* rk, int, const char* fac, const char* buf) {
  auto* sink = static_cast<LogSink*>(rd_kafka_opaque(rk));
  if (sink != nullptr && sink->fn) sink->fn(fac, buf);
}

struct TopicPartitionListDeleter {
  void operator()(rd_kafka_topic_partition_list_t* l) const { rd_kafka_topic_partition_list_destroy(l); }
};
using TopicPartitionListPtr = std::unique_ptr<rd_kafka_topic_partition_list_t, TopicPartitionListDeleter>;

}  // namespace

RdKafkaPtr make_client(rd_kafka_type_t type, const std::map<std::string, std::string>& props,
                       std::function<void(const std::string&, const std::string&)> log) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (const auto& [name, value] : props) {
    if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      throw std::invalid_argument("librdkafka property " + name + ": " + err);
    }
  }
  if (log) {
    rd_kafka_conf_set_opaque(conf, keep_sink(LogSink{std::move(log)}));
    rd_kafka_conf_set_log_cb(conf, log_trampoline);
  }
  rd_kafka_t* rk = rd_kafka_new(type, conf, err, sizeof err);
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    throw std::runtime_error(std::string("rd_kafka_new: ") + err);
  }
  return RdKafkaPtr(rk);
}

std::optional<std::string> ConsumedRecord::header(const std::string& name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return std::nullopt;
}

ConsumedRecord to_record(const rd_kafka_message_t* msg) {
  ConsumedRecord rec;
  rec.topic = rd_kafka_topic_name(msg->rkt);
  rec.partition = msg->partition;
  rec.offset = msg->offset;
  if (msg->key != nullptr) rec.key = std::string(static_cast<const char*>(msg->key), msg->key_len);
  if (msg->payload != nullptr) rec.value = std::string(static_cast<const char*>(msg->payload), msg->len);
  rd_kafka_timestamp_type_t tstype;
  rec.timestamp_ms = rd_kafka_message_timestamp(msg, &tstype);
  rd_kafka_headers_t* hdrs = nullptr;
  if (rd_kafka_message_headers(msg, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    const char* name = nullptr;
    const void* value = nullptr;
    size_t size = 0;
    for (size_t i = 0; rd_kafka_header_get_all(hdrs, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i) {
      rec.headers.emplace_back(name,
                               value == nullptr ? std::string() : std::string(static_cast<const char*>(value), size));
    }
  }
  return rec;
}

std::vector<ConsumedRecord> read_topic(const std::string& bootstrap, const std::string& topic, std::size_t expected,
                                       std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto consumer = make_client(RD_KAFKA_CONSUMER, {{"bootstrap.servers", bootstrap},
                                                  {"group.id", "pgoutbox-test-reader"},
                                                  {"enable.auto.commit", "false"},
                                                  {"enable.partition.eof", "true"},
                                                  {"allow.auto.create.topics", "false"}});
  // Partitions of the topic (waits until it exists, so a test may read before the first write).
  std::vector<int32_t> partitions;
  while (partitions.empty()) {
    rd_kafka_topic_t* rkt = rd_kafka_topic_new(consumer.get(), topic.c_str(), nullptr);
    const rd_kafka_metadata_t* md = nullptr;
    if (rd_kafka_metadata(consumer.get(), 0, rkt, &md, 2000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        for (int i = 0; i < md->topics[0].partition_cnt; ++i) partitions.push_back(md->topics[0].partitions[i].id);
      }
      rd_kafka_metadata_destroy(md);
    }
    rd_kafka_topic_destroy(rkt);
    if (partitions.empty()) {
      if (std::chrono::steady_clock::now() >= deadline) return {};
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  TopicPartitionListPtr assignment(rd_kafka_topic_partition_list_new(static_cast<int>(partitions.size())));
  for (const int32_t p : partitions) {
    rd_kafka_topic_partition_list_add(assignment.get(), topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  }
  if (rd_kafka_assign(consumer.get(), assignment.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    throw std::runtime_error("assign failed for " + topic);
  }
  std::vector<ConsumedRecord> out;
  std::set<int32_t> at_end;
  while (std::chrono::steady_clock::now() < deadline) {
    rd_kafka_message_t* msg = rd_kafka_consumer_poll(consumer.get(), 200);
    if (msg == nullptr) continue;
    if (msg->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      at_end.insert(msg->partition);
    } else if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      at_end.erase(msg->partition);
      out.push_back(to_record(msg));
    }
    rd_kafka_message_destroy(msg);
    if (out.size() >= expected && at_end.size() == partitions.size()) break;
  }
  rd_kafka_consumer_close(consumer.get());
  return out;
}

std::int64_t topic_record_count(const std::string& bootstrap, const std::string& topic) {
  auto client =
      make_client(RD_KAFKA_CONSUMER, {{"bootstrap.servers", bootstrap}, {"allow.auto.create.topics", "false"}});
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(client.get(), topic.c_str(), nullptr);
  const rd_kafka_metadata_t* md = nullptr;
  std::int64_t total = 0;
  if (rd_kafka_metadata(client.get(), 0, rkt, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    if (md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      for (int i = 0; i < md->topics[0].partition_cnt; ++i) {
        int64_t low = 0, high = 0;
        if (rd_kafka_query_watermark_offsets(client.get(), topic.c_str(), md->topics[0].partitions[i].id, &low, &high,
                                             5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
          total += high;
        }
      }
    }
    rd_kafka_metadata_destroy(md);
  }
  rd_kafka_topic_destroy(rkt);
  return total;
}

int topic_partitions(const std::string& bootstrap, const std::string& topic) {
  auto client =
      make_client(RD_KAFKA_CONSUMER, {{"bootstrap.servers", bootstrap}, {"allow.auto.create.topics", "false"}});
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(client.get(), topic.c_str(), nullptr);
  const rd_kafka_metadata_t* md = nullptr;
  int partitions = 0;
  if (rd_kafka_metadata(client.get(), 0, rkt, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    if (md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR) partitions = md->topics[0].partition_cnt;
    rd_kafka_metadata_destroy(md);
  }
  rd_kafka_topic_destroy(rkt);
  return partitions;
}

namespace {

// Asks the broker for `topic`'s metadata until `holds` says what the caller waits for (30 s at
// most): an admin call's answer comes before the broker serves what it changed.
bool await_metadata(rd_kafka_t* rk, const std::string& topic,
                    const std::function<bool(const rd_kafka_metadata_topic_t&)>& holds) {
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool held = false;
  while (!held && std::chrono::steady_clock::now() < deadline) {
    const rd_kafka_metadata_t* md = nullptr;
    if (rd_kafka_metadata(rk, 0, rkt, &md, 2000) == RD_KAFKA_RESP_ERR_NO_ERROR && md != nullptr) {
      held = md->topic_cnt == 1 && holds(md->topics[0]);
      rd_kafka_metadata_destroy(md);
    }
    if (!held) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  rd_kafka_topic_destroy(rkt);
  return held;
}

}  // namespace

void delete_topic(const std::string& bootstrap, const std::string& topic) {
  // A producer's metadata request creates a missing topic on a broker that allows it (librdkafka's
  // producer default): the check that it is gone must not bring it back.
  auto admin =
      make_client(RD_KAFKA_PRODUCER, {{"bootstrap.servers", bootstrap}, {"allow.auto.create.topics", "false"}});
  rd_kafka_DeleteTopic_t* dt = rd_kafka_DeleteTopic_new(topic.c_str());
  rd_kafka_queue_t* queue = rd_kafka_queue_new(admin.get());
  rd_kafka_DeleteTopics(admin.get(), &dt, 1, nullptr, queue);
  rd_kafka_event_t* ev = rd_kafka_queue_poll(queue, 30000);
  std::string failure;
  if (ev == nullptr) {
    failure = "no DeleteTopics result in 30 s";
  } else {
    size_t n = 0;
    const rd_kafka_topic_result_t** results =
        rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev), &n);
    if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      failure = rd_kafka_event_error_string(ev);
    } else if (n == 1 && rd_kafka_topic_result_error(results[0]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      failure = rd_kafka_topic_result_error_string(results[0]);
    }
    rd_kafka_event_destroy(ev);
  }
  rd_kafka_queue_destroy(queue);
  rd_kafka_DeleteTopic_destroy(dt);
  if (!failure.empty()) throw std::runtime_error("delete topic " + topic + ": " + failure);
  // Gone once the broker's metadata no longer names it.
  const bool gone = await_metadata(admin.get(), topic, [](const rd_kafka_metadata_topic_t& t) {
    return t.err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
  });
  if (!gone) throw std::runtime_error("delete topic " + topic + ": the broker still names it after 30 s");
}

void create_topic(const std::string& bootstrap, const std::string& topic, int partitions,
                  const std::map<std::string, std::string>& config) {
  auto admin = make_client(RD_KAFKA_PRODUCER, {{"bootstrap.servers", bootstrap}});
  char err[512];
  rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(topic.c_str(), partitions, 1, err, sizeof err);
  if (nt == nullptr) throw std::runtime_error(std::string("NewTopic: ") + err);
  for (const auto& [k, v] : config) rd_kafka_NewTopic_set_config(nt, k.c_str(), v.c_str());
  rd_kafka_queue_t* queue = rd_kafka_queue_new(admin.get());
  rd_kafka_CreateTopics(admin.get(), &nt, 1, nullptr, queue);
  rd_kafka_event_t* ev = rd_kafka_queue_poll(queue, 30000);
  std::string failure;
  if (ev == nullptr) {
    failure = "no CreateTopics result in 30 s";
  } else {
    const rd_kafka_CreateTopics_result_t* res = rd_kafka_event_CreateTopics_result(ev);
    size_t n = 0;
    const rd_kafka_topic_result_t** results = rd_kafka_CreateTopics_result_topics(res, &n);
    if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      failure = rd_kafka_event_error_string(ev);
    } else if (n == 1 && rd_kafka_topic_result_error(results[0]) != RD_KAFKA_RESP_ERR_NO_ERROR &&
               rd_kafka_topic_result_error(results[0]) != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
      failure = rd_kafka_topic_result_error_string(results[0]);
    }
    rd_kafka_event_destroy(ev);
  }
  rd_kafka_queue_destroy(queue);
  rd_kafka_NewTopic_destroy(nt);
  if (!failure.empty()) throw std::runtime_error("create topic " + topic + ": " + failure);
  // CreateTopics answers once the controller has the topic; the broker serves it (metadata,
  // DescribeConfigs, produce) only once it has replayed that record, a moment later. A test uses
  // the topic at once, so wait for the broker to name it with every partition.
  const bool known = await_metadata(admin.get(), topic, [partitions](const rd_kafka_metadata_topic_t& t) {
    return t.err == RD_KAFKA_RESP_ERR_NO_ERROR && t.partition_cnt >= partitions;
  });
  if (!known) throw std::runtime_error("create topic " + topic + ": the broker did not name it within 30 s");
}

void alter_topic_config(const std::string& bootstrap, const std::string& topic,
                        const std::map<std::string, std::string>& config) {
  auto admin = make_client(RD_KAFKA_PRODUCER, {{"bootstrap.servers", bootstrap}});
  rd_kafka_ConfigResource_t* resource = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic.c_str());
  for (const auto& [name, value] : config) {
    if (rd_kafka_error_t* e = rd_kafka_ConfigResource_add_incremental_config(
            resource, name.c_str(), RD_KAFKA_ALTER_CONFIG_OP_TYPE_SET, value.c_str())) {
      const std::string why = rd_kafka_error_string(e);
      rd_kafka_error_destroy(e);
      rd_kafka_ConfigResource_destroy(resource);
      throw std::runtime_error("alter topic " + topic + ": " + why);
    }
  }
  rd_kafka_queue_t* queue = rd_kafka_queue_new(admin.get());
  rd_kafka_IncrementalAlterConfigs(admin.get(), &resource, 1, nullptr, queue);
  rd_kafka_event_t* ev = rd_kafka_queue_poll(queue, 30000);
  std::string failure;
  if (ev == nullptr) {
    failure = "no IncrementalAlterConfigs result in 30 s";
  } else if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    failure = rd_kafka_event_error_string(ev);
  } else {
    std::size_t n = 0;
    const auto* result = rd_kafka_event_IncrementalAlterConfigs_result(ev);
    const auto** resources = rd_kafka_IncrementalAlterConfigs_result_resources(result, &n);
    for (std::size_t i = 0; i < n; ++i) {
      if (rd_kafka_ConfigResource_error(resources[i]) != RD_KAFKA_RESP_ERR_NO_ERROR)
        failure = rd_kafka_ConfigResource_error_string(resources[i]);
    }
  }
  if (ev != nullptr) rd_kafka_event_destroy(ev);
  rd_kafka_queue_destroy(queue);
  rd_kafka_ConfigResource_destroy(resource);
  if (!failure.empty()) throw std::runtime_error("alter topic " + topic + ": " + failure);
}

}  // namespace pgoutbox::test

namespace pgoutbox::test {

void allow_acls(const std::string& bootstrap, const std::string& principal, const std::vector<AclGrant>& grants) {
  auto admin = make_client(RD_KAFKA_PRODUCER, {{"bootstrap.servers", bootstrap}});
  char err[512];
  std::vector<rd_kafka_AclBinding_t*> bindings;
  for (const auto& g : grants) {
    rd_kafka_AclBinding_t* binding =
        rd_kafka_AclBinding_new(g.type, g.name.c_str(), g.pattern, principal.c_str(), "*", g.operation,
                                RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW, err, sizeof err);
    if (binding == nullptr) throw std::runtime_error(std::string("AclBinding: ") + err);
    bindings.push_back(binding);
  }
  rd_kafka_queue_t* queue = rd_kafka_queue_new(admin.get());
  rd_kafka_CreateAcls(admin.get(), bindings.data(), bindings.size(), nullptr, queue);
  rd_kafka_event_t* ev = rd_kafka_queue_poll(queue, 30000);
  std::string failure;
  if (ev == nullptr) {
    failure = "no CreateAcls result in 30 s";
  } else {
    if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      failure = rd_kafka_event_error_string(ev);
    } else {
      size_t n = 0;
      const rd_kafka_acl_result_t** results = rd_kafka_CreateAcls_result_acls(rd_kafka_event_CreateAcls_result(ev), &n);
      for (size_t i = 0; i < n && failure.empty(); ++i) {
        if (const rd_kafka_error_t* e = rd_kafka_acl_result_error(results[i]); e != nullptr) {
          failure = rd_kafka_error_string(e);
        }
      }
    }
    rd_kafka_event_destroy(ev);
  }
  rd_kafka_queue_destroy(queue);
  for (auto* b : bindings) rd_kafka_AclBinding_destroy(b);
  if (!failure.empty()) throw std::runtime_error("create ACLs for " + principal + ": " + failure);
}

}  // namespace pgoutbox::test
