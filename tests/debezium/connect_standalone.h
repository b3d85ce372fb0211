#pragma once

// Kafka Connect standalone running the pinned Debezium jars (.deps/debezium/libs, installed by
// scripts/setup.sh) with one or more connectors, for the tests that compare pgoutbox with
// Debezium on the same rows.

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "child_process.h"

namespace pgoutbox::test {

using ConnectorSettings = std::map<std::string, std::string>;

// Where the jars are: PGOUTBOX_DEBEZIUM_LIBS, else the build's .deps/debezium/libs.
std::string debezium_libs();

class ConnectStandalone {
 public:
  // Starts the worker with `worker` properties (bootstrap.servers, offsets and listener added)
  // and each connector, logging to `dir`/connect.log.
  ConnectStandalone(const std::string& dir, const std::string& bootstrap, const ConnectorSettings& worker,
                    const std::vector<ConnectorSettings>& connectors);
  // SIGTERM, then waits up to a minute; false when it did not exit.
  bool stop();
  const std::string& log() const { return log_; }

 private:
  static ChildProcess start(const std::string& dir, const std::string& bootstrap, const ConnectorSettings& worker,
                            const std::vector<ConnectorSettings>& connectors, const std::string& log);
  std::string log_;
  ChildProcess child_;
};

// Debezium's Postgres connector with the outbox EventRouter, as the tests configure it: on the
// local cluster at `port` as postgres, pgoutput on an existing `slot` and `publication`, no
// snapshot, the tables listed; converters and router options are the caller's to add.
ConnectorSettings outbox_connector(const std::string& name, int port, const std::string& slot,
                                   const std::string& publication, const std::string& tables);

// A connector's settings as Connect's REST JSON ({"name", "config"}), the input of from-debezium.
std::string connector_json(const ConnectorSettings& settings);

}  // namespace pgoutbox::test
