#pragma once

// One DescribeConfigs request for one resource (a topic, or a broker by its id): the
// configuration entries the broker gives, or the error that stood in the way (no
// DESCRIBE_CONFIGS ACL, an unknown topic, no answer within the timeout).

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <map>
#include <string>

namespace pgoutbox::kafka {

struct DescribedConfig {
  rd_kafka_resp_err_t error = RD_KAFKA_RESP_ERR_NO_ERROR;
  std::map<std::string, std::string> entries;  // name → value (empty for a value the broker hides)
  bool ok() const { return error == RD_KAFKA_RESP_ERR_NO_ERROR; }
};

DescribedConfig describe_config(rd_kafka_t* rk, rd_kafka_ResourceType_t type, const std::string& name,
                                std::chrono::milliseconds timeout);

}  // namespace pgoutbox::kafka
