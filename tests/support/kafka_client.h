#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pgoutbox::test {

struct RdKafkaDeleter {
  void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
};
using RdKafkaPtr = std::unique_ptr<rd_kafka_t, RdKafkaDeleter>;

// Builds a client from properties; throws naming the bad property. `log` receives librdkafka's
// log lines (fac, text) when set.
RdKafkaPtr make_client(rd_kafka_type_t type, const std::map<std::string, std::string>& props,
                       std::function<void(const std::string&, const std::string&)> log = {});

// One record as a test reads it back from Kafka.
struct ConsumedRecord {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  std::optional<std::string> key;
  std::optional<std::string> value;  // nullopt for a tombstone
  std::vector<std::pair<std::string, std::string>> headers;
  int64_t timestamp_ms = 0;

  std::optional<std::string> header(const std::string& name) const;
};

// Reads every record of `topic` from the beginning, by assignment (no group), until the end
// offsets observed at the call or `expected` records, whichever comes later, or the timeout.
std::vector<ConsumedRecord> read_topic(const std::string& bootstrap, const std::string& topic, std::size_t expected,
                                       std::chrono::milliseconds timeout);

// One ALLOW ACL: `operation` on a resource, for any host.
struct AclGrant {
  rd_kafka_ResourceType_t type;
  std::string name;
  rd_kafka_ResourcePatternType_t pattern;
  rd_kafka_AclOperation_t operation;
};

// Creates `grants` for `principal` ("User:name") through the admin API of `bootstrap` (a
// listener whose principal is a super user) and waits for the result.
void allow_acls(const std::string& bootstrap, const std::string& principal, const std::vector<AclGrant>& grants);

// Creates a topic with the admin API and waits for the result.
// Deletes the topic and waits until the broker no longer names it.
void delete_topic(const std::string& bootstrap, const std::string& topic);
void create_topic(const std::string& bootstrap, const std::string& topic, int partitions,
                  const std::map<std::string, std::string>& config = {});

// Sets `config` on `topic` (IncrementalAlterConfigs), as an operator would while pgoutbox runs;
// throws when the broker refuses.
void alter_topic_config(const std::string& bootstrap, const std::string& topic,
                        const std::map<std::string, std::string>& config);

ConsumedRecord to_record(const rd_kafka_message_t* msg);

// Whether the broker names the topic now (asked without creating it), and with how many partitions:
// 0 when it does not exist.
int topic_partitions(const std::string& bootstrap, const std::string& topic);

// Sum of the topic's partitions' high watermarks (records ever written, none deleted here);
// 0 when the topic does not exist yet.
std::int64_t topic_record_count(const std::string& bootstrap, const std::string& topic);

}  // namespace pgoutbox::test
