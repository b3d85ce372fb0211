#pragma once

// What the secured-Kafka tests (kafka_secured_test.cpp, kafka_oidc_test.cpp) share: pgoutbox run
// against a secured broker until its log shows what the case waits for.

#include <signal.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "eventually.h"
#include "pg_cluster.h"
#include "pgoutbox_process.h"

namespace pgoutbox::test {

inline std::string whole_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// What an at-least-once run logs when Kafka refuses the checkpoint reader's login: the read stops
// at the refusal, named, instead of waiting out its deadline on metadata that cannot come.
inline constexpr const char* kCheckpointLoginRefused = "checkpoint: cannot read it (Kafka refused the login: ";

struct SecuredRun {
  PgCluster& pg;
  std::string dir;            // where the log goes
  std::string aggregatetype;  // of the rows inserted
  std::chrono::seconds wait;  // for the slot to be active, then for `done`
};

// Runs pgoutbox with `cfg` (table `name`, slot `<name>_slot`), inserts `rows` rows once it
// streams, and returns its log once `done` holds on it (or `run.wait` passed); then stops it and
// drops the slot.
inline std::string run_until(const SecuredRun& run, const std::string& name, const std::string& cfg,
                             std::vector<std::string> env, const std::function<bool(const std::string&)>& done,
                             int rows) {
  const std::string log = run.dir + "/" + name + ".log";
  // A broker that refuses the client never acknowledges the row, and SIGTERM would wait out
  // the default 30 s for it.
  env.emplace_back("PGOUTBOX_SHUTDOWN_TIMEOUT=3s");
  PgoutboxProcess process(PGOUTBOX_BINARY, cfg, log, env);
  PGOUTBOX_EXPECT_EVENTUALLY(
      run.pg.query_value("SELECT active FROM pg_replication_slots WHERE slot_name = '" + name + "_slot'") == "t",
      run.wait)
      << whole_file(log);
  run.pg.exec("INSERT INTO " + name + " (aggregatetype, aggregateid, payload) SELECT '" + run.aggregatetype +
              "', 'k-' || g, '{}' FROM generate_series(1, " + std::to_string(rows) + ") g");
  PGOUTBOX_EXPECT_EVENTUALLY(done(whole_file(log)), run.wait) << whole_file(log);
  process.signal(SIGTERM);
  if (!process.wait_exit(std::chrono::seconds(30))) process.kill9();
  run.pg.drop_slot_when_free(name + "_slot");
  return whole_file(log);
}

}  // namespace pgoutbox::test
