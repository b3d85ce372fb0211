#pragma once

// The operator's commands beside `run`: `check`, `status`, `slot drop`, `republish`,
// `config validate`, `config from-debezium` and the hidden `config-reference`. Each returns the process's exit code
// (docs/operating.md "Exit codes").

#include <chrono>
#include <string>

namespace pgoutbox::app {

// Exit codes of the operator's commands; 0 is success and 2 an invalid configuration, as for
// `run` (run_command.h).
enum OperatorExit : int {
  kExitBlocked = 1,     // check: something blocks; slot drop: refused without --yes, nothing changed
  kExitPostgres = 5,    // PostgreSQL cannot be reached or a query failed
  kExitNoSlot = 6,      // the configured slot does not exist
  kExitSlotActive = 7,  // slot drop: a session holds the slot, nothing dropped
  kExitUsage = 64,      // the command line is wrong (sysexits.h EX_USAGE)
};

// `pgoutbox check -c FILE`: one line per finding on stdout, then a summary.
int check(const std::string& config_path, std::chrono::milliseconds kafka_timeout);

// `pgoutbox status -c FILE [--json]`.
int status(const std::string& config_path, bool json);

// `pgoutbox slot drop -c FILE --yes`.
int slot_drop(const std::string& config_path, bool confirmed);

// `pgoutbox config validate FILE`: loads it as `run` does, connects to nothing.
int config_validate(const std::string& config_path);

// `pgoutbox config from-debezium CONNECTOR.json`: the equivalent pgoutbox YAML on stdout.
int config_from_debezium(const std::string& connector_path, const std::string& worker_path);

// `pgoutbox republish -c FILE --table T --where PREDICATE [--dry-run]`.
struct RepublishOptions {
  std::string table;
  std::string where;
  bool dry_run = false;
};
int republish(const std::string& config_path, const RepublishOptions& options);

// `pgoutbox config-reference`: docs/configuration.md, generated from the configuration schema.
std::string configuration_reference();

}  // namespace pgoutbox::app
