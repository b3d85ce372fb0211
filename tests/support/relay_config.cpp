#include "relay_config.h"

namespace pgoutbox::test {

config::Config relay_config(const std::string& dsn, const std::string& brokers, const std::string& name) {
  using namespace std::chrono_literals;
  config::Config cfg;
  cfg.postgres.dsn = dsn;
  cfg.postgres.slot = name + "_slot";
  cfg.postgres.publication = name + "_pub";
  cfg.postgres.create_publication = true;
  cfg.postgres.status_interval = 200ms;
  cfg.kafka.brokers = brokers;
  config::TableConfig t;
  t.name = name;
  t.topic = name + ".${aggregatetype}";
  cfg.tables.push_back(t);
  cfg.shutdown_timeout = 10s;
  cfg.checkpoint.signing_key = "test-signing-key-0123456789abcdef0123456789";
  return cfg;
}

}  // namespace pgoutbox::test
