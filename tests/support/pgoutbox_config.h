#pragma once

// The one writer of pgoutbox's YAML configuration file for tests that run the binary.

#include <map>
#include <string>
#include <vector>

namespace pgoutbox::test {

// What a test puts in pgoutbox's YAML file. Empty strings are keys left out (pgoutbox's
// default applies). `extra_yaml` is appended as is (top-level sections such as limits:,
// poison:, reconnect:, shutdown_timeout:).
// The checkpoint signing key of a test deployment (docs/spec.md I11), as the environment gives it.
inline constexpr const char* kCheckpointSigningKeyEnv =
    "PGOUTBOX_CHECKPOINT_SIGNING_KEY=test-signing-key-0123456789abcdef0123456789";

struct PgoutboxConfig {
  struct Table {
    std::string table{};  // schema-qualified, e.g. "public.orders"
    std::string topic{};  // template, e.g. "name.${aggregatetype}"; empty: the default
    bool validate_json = false;
    std::string extra_yaml{};  // more keys of this table, each line indented by four spaces
  };
  std::string dsn;
  std::string slot;
  std::string publication;
  bool create_publication = true;
  std::string status_interval = "200ms";
  std::string brokers;
  std::map<std::string, std::string> kafka_properties;
  std::string kafka_extra_yaml;  // more keys of kafka:, each line indented by two spaces
  std::vector<Table> tables;
  std::string metrics_address;  // host:port
  std::string log_format;       // empty: auto (JSON unless stderr is a terminal)
  std::string extra_yaml;
};

// The usual one-table pipeline `name`: table public.<name>, slot <name>_slot, publication
// <name>_pub (created by pgoutbox), topics "<name>.${aggregatetype}", status every 200ms.
PgoutboxConfig pipeline_config(const std::string& dsn, const std::string& brokers, const std::string& name);

// Writes the configuration file and returns its path.
std::string write_pgoutbox_config(const std::string& path, const PgoutboxConfig& config);

}  // namespace pgoutbox::test
