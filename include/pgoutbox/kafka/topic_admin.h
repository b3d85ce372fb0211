#pragma once

// Asking the cluster about one topic and creating one: the checkpoint topic (compacted, one
// partition, before a replication slot is created) and the dead-letter topic (the broker's
// defaults, at every session's start) are both created this way.

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <map>
#include <string>

namespace pgoutbox::kafka {

// What one metadata answer says of the topic: only `exists` (with its partition count) and
// `unknown` (UNKNOWN_TOPIC_OR_PART) are answers; anything else (no answer, a leader not
// available, no partitions) says nothing and is asked again. Throws std::runtime_error when the
// principal may not describe the topic.
struct TopicAnswer {
  enum class Kind { exists, unknown, no_answer } kind = Kind::no_answer;
  int partitions = 0;
  std::string error;  // why there is no answer
};
TopicAnswer describe_topic(rd_kafka_t* rk, const std::string& topic, std::chrono::milliseconds timeout);

struct NewTopic {
  std::string name;
  int partitions = -1;                        // -1: the broker's num.partitions
  std::map<std::string, std::string> config;  // e.g. cleanup.policy=compact
};

// The outcome of one CreateTopics request. `refused` is the broker's definite no for this name
// (a twin that collides with it, a policy, an invalid configuration), which asking again cannot
// change; `failed` is anything else (no answer, not authorised, the controller busy).
struct TopicCreation {
  enum class Kind { created, exists, refused, failed } kind = Kind::failed;
  std::string error;  // the broker's words, for a message
};
TopicCreation create_topic(rd_kafka_t* rk, const NewTopic& topic, std::chrono::milliseconds timeout);

// A client for admin requests with the producer's properties (TLS, SASL) and client.id followed
// by `role`: it never produces, and asking about a topic never creates it. Throws
// std::invalid_argument when librdkafka refuses a property.
rd_kafka_t* admin_client(const std::string& brokers, const std::map<std::string, std::string>& properties,
                         const std::string& role);

// `created` or `exists` once the cluster names the topic (created now when it did not), `refused`
// when the broker will never create it, `failed` when no definite answer came within `timeout`.
TopicCreation ensure_topic(const std::string& brokers, const std::map<std::string, std::string>& properties,
                           const NewTopic& topic, std::chrono::milliseconds timeout);

}  // namespace pgoutbox::kafka
