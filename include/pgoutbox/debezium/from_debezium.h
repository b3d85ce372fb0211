#pragma once

// `pgoutbox config from-debezium`: a Debezium Postgres connector configuration with the outbox
// EventRouter transform in, the pgoutbox configuration that publishes the same records out
// (docs/migrating.md "Switching from Debezium"). Secrets are never copied: the output names the
// environment variables that carry them.

#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace pgoutbox::debezium {

struct Conversion {
  std::string yaml;                   // loads with config::load_string
  std::vector<std::string> left_out;  // "setting: why", one per setting not carried over
};

// The input cannot be converted at all: not JSON, not a Postgres connector, no EventRouter.
class Unusable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `json` is the Kafka Connect JSON: {"name": ..., "config": {...}} or the bare config map.
// `worker_properties`: the Connect worker's file (key.converter and value.converter apply from
// it when the connector sets none), empty when not given.
Conversion from_debezium(std::string_view json, std::string_view worker_properties = {});

// The key=value pairs of a Java .properties file (a Connect worker's).
std::map<std::string, std::string> parse_properties(std::string_view text);

}  // namespace pgoutbox::debezium
