// The command line: parses it and hands over to the command's module.
#include <sys/prctl.h>

#include <librdkafka/rdkafka.h>
#include <CLI/CLI.hpp>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "operator_commands.h"
#include "pgoutbox/logging/logging.h"
#include "pgoutbox/version.h"
#include "run_command.h"

// Every command catches the failures it expects and returns its exit code; what still escapes
// (CLI11's ConstructionError on a malformed option, bad_alloc, a bug) is left to std::terminate,
// whose abort and core are the report wanted for a bug.
// NOLINTNEXTLINE(bugprone-exception-escape): only bugs and out-of-memory reach here, see above
int main(int argc, char** argv) {
  // Every command reads the configuration and its secrets (the DSN password, SASL secrets): a
  // core dump or a ptrace of any of them, not only of run, would expose them (SECURITY.md
  // "Secrets and transport").
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  using namespace pgoutbox::app;
  CLI::App app{"pgoutbox: relays transactional-outbox rows from a PostgreSQL logical replication slot to Apache Kafka"};
  app.name("pgoutbox");
  // The second line names the librdkafka linked in (statically, docs/versions.md "The linked librdkafka"):
  // what a Kafka client defect report needs; help2man takes the first line only.
  app.set_version_flag("--version",
                       std::string("pgoutbox ") + pgoutbox::kVersion + "\nlibrdkafka " + rd_kafka_version_str());
  app.require_subcommand(0, 1);
  app.footer(
      "Exit codes: 0 done; 1 check found something that blocks, or slot drop refused without --yes; 2 invalid "
      "configuration; 3, 4 and 10-25 run stopped for a cause the operator must fix (docs/operating.md); 5 PostgreSQL "
      "cannot be "
      "reached; 6 the slot does not exist; 7 slot drop refused while the slot is active; 8 run stopped with records "
      "unacknowledged at shutdown_timeout; 64 wrong command line; 130 run left at once on a second signal.");

  std::string config_path;
  const auto config_option = [&](CLI::App* command) {
    command->add_option("-c,--config", config_path, "the YAML configuration file")->required();
  };
  auto* run = app.add_subcommand("run", "stream until SIGTERM/SIGINT, then stop reading, flush Kafka, confirm, exit 0");
  config_option(run);
  pgoutbox::app::RunOptions run_options;
  run->add_flag("--accept-lost-checkpoint", run_options.accept_lost_checkpoint,
                "exactly-once: start although the slot's checkpoint is lost (the checkpoint topic is new, or holds "
                "only records under the slot's key it cannot use) and the slot older, publishing again what Kafka may "
                "already hold after the slot's position (exit 25 without it)");
  run->footer(
      "Exit codes: 0 stopped by a signal after Kafka's acks were confirmed; 2 invalid configuration, or "
      "metrics_address cannot listen; 3 internal error; 4 poison record (poison.policy: stop); 8 stopped by a signal "
      "with records unacknowledged when shutdown_timeout expired (not confirmed, sent again at the next start); 10 "
      "slot invalidated; 11 slot unusable; 12 publication; 13 outbox table missing; 14 role lacks a right; 15 "
      "wal_level; 16 authentication; 17 a mapped column is missing or unusable; 18 librdkafka refused a property; 19 "
      "the slot decodes two-phase transactions; 20 TLS certificate verification failed; 21 PostgreSQL too old for "
      "pgoutbox or a configured feature; 22 exactly-once: fenced by a newer instance; 23 exactly-once: an open Kafka "
      "transaction hides the end of the checkpoint topic; 24 the checkpoint topic refuses the checkpoint for good; 25 "
      "exactly-once: the slot's checkpoint is lost though the slot is older (--accept-lost-checkpoint); 64 wrong "
      "command "
      "line; 130 a second signal.");

  int kafka_timeout_s = 5;
  auto* check = app.add_subcommand("check",
                                   "preflight: server settings, role rights, publication, columns, slot, Kafka and "
                                   "topics; one line per finding with its fix; exit 1 when something blocks");
  config_option(check);
  check->footer(
      "Exit codes: 0 nothing blocks; 1 something blocks (each FAIL line names its fix); 2 invalid "
      "configuration; 21 PostgreSQL too old for pgoutbox or a configured feature; 64 wrong command line.");
  check->add_option("--kafka-timeout", kafka_timeout_s, "seconds to wait for a Kafka broker to answer (default 5)")
      ->check(CLI::Range(1, 300));

  bool json = false;
  auto* status =
      app.add_subcommand("status", "the slot: active pid, confirmed LSN, lag and retained WAL in bytes, wal_status");
  config_option(status);
  status->footer(
      "Exit codes: 0 done; 2 invalid configuration; 5 PostgreSQL cannot be reached or a query failed; 6 the "
      "slot does not exist; 64 wrong command line.");
  status->add_flag("--json", json, "one JSON object instead of lines");

  bool yes = false;
  auto* slot = app.add_subcommand("slot", "manage the replication slot (slot drop)");
  slot->require_subcommand(0, 1);
  slot->allow_extras();
  slot->footer("Subcommands: drop. Exit codes as for slot drop.");
  auto* drop = slot->add_subcommand("drop",
                                    "drop the slot (its unconfirmed events are then never relayed) and the "
                                    "backfill's marker slots of its name; refuses without --yes and while a session "
                                    "streams from it");
  config_option(drop);
  drop->add_flag("--yes", yes, "really drop it");
  drop->footer(
      "Exit codes: 0 dropped; 1 refused without --yes, nothing changed; 2 invalid configuration; 5 "
      "PostgreSQL cannot be reached or a query failed; 6 the slot does not exist; 7 a session holds the slot, "
      "nothing dropped; 64 wrong command line.");

  RepublishOptions republish_options;
  auto* republish = app.add_subcommand(
      "republish",
      "publish the rows of a table matching --where again (count first), through the same mapping, producer and "
      "poison policy, each with header pgoutbox.republished: true; never touches the slot");
  config_option(republish);
  republish->add_option("--table", republish_options.table, "the configured table (schema.table)")->required();
  republish->add_option("--where", republish_options.where, "an SQL predicate over the table's columns")->required();
  republish->add_flag("--dry-run", republish_options.dry_run, "count the matching rows, publish nothing");
  republish->footer(
      "Exit codes: 0 published (or counted with --dry-run); 2 invalid configuration; 4 poison record "
      "(poison.policy: stop); 5 PostgreSQL cannot be reached, a query failed, or Kafka did not acknowledge every "
      "record; 17 a mapped column is missing or unusable; 18 librdkafka refused a property; 64 wrong command line, "
      "an unknown --table or a --where PostgreSQL refuses.");
  std::string connector_path;
  std::string worker_path;
  auto* config_cmd = app.add_subcommand(
      "config", "check a configuration (config validate) or convert another relay's (config from-debezium)");
  config_cmd->require_subcommand(1, 1);
  config_cmd->footer("Subcommands: validate, from-debezium. Exit codes as for each subcommand.");
  std::string validate_path;
  auto* validate = config_cmd->add_subcommand(
      "validate",
      "load a configuration file as run would (environment overrides applied, secret files read) and connect to "
      "nothing; one line on stdout when it is valid");
  validate->add_option("FILE", validate_path, "the YAML configuration file")->required();
  validate->footer("Exit codes: 0 valid; 2 invalid configuration (why on stderr); 64 wrong command line.");
  auto* from_debezium = config_cmd->add_subcommand(
      "from-debezium",
      "print the pgoutbox YAML equivalent to a Debezium Postgres connector configuration with the outbox "
      "EventRouter; every setting not carried over is listed on stderr with why");
  from_debezium
      ->add_option("CONNECTOR.json", connector_path, "Kafka Connect JSON: {\"name\", \"config\"} or the bare map")
      ->required();
  from_debezium->add_option("--worker", worker_path,
                            "the Connect worker's properties file: its key.converter and value.converter (and their "
                            "schemas.enable) apply where the connector sets none");
  from_debezium->footer(
      "Exit codes: 0 written (settings not carried over are on stderr); 2 the connector configuration is unreadable "
      "or unusable (not JSON, not the Postgres connector, no EventRouter); 64 wrong command line.");

  auto* reference = app.add_subcommand(
      "config-reference", "print the configuration reference (Markdown; docs/configuration.md is its output)");
  reference->footer("Exit codes: 0 done; 64 wrong command line.");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive as "errors" whose exit code is 0.
    if (app.exit(e) == 0) return kExitOk;
    return kExitUsage;
  }
  spdlog::set_formatter(pgoutbox::logging::make_pattern_formatter("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v"));
  if (run->parsed()) return pgoutbox::app::run(config_path, run_options);
  if (check->parsed()) return pgoutbox::app::check(config_path, std::chrono::seconds(kafka_timeout_s));
  if (status->parsed()) return pgoutbox::app::status(config_path, json);
  if (drop->parsed()) return slot_drop(config_path, yes);
  if (republish->parsed()) return pgoutbox::app::republish(config_path, republish_options);
  if (slot->parsed()) {
    const auto rest = slot->remaining();
    if (rest.empty()) {
      std::fputs("pgoutbox slot: a subcommand is needed: drop (pgoutbox slot drop --help)\n", stderr);
    } else {
      std::fprintf(stderr,
                   "pgoutbox slot: unknown subcommand \"%s\"; the one there is: drop (pgoutbox slot drop --help)\n",
                   rest.front().c_str());
    }
    return kExitUsage;
  }
  if (validate->parsed()) return config_validate(validate_path);
  if (from_debezium->parsed()) return config_from_debezium(connector_path, worker_path);
  if (reference->parsed()) {
    std::fputs(configuration_reference().c_str(), stdout);
    return kExitOk;
  }
  // No command at all: the short usage, as a wrong command line (sysexits EX_USAGE).
  std::fputs(
      "usage: pgoutbox run|check|status -c FILE\n"
      "       pgoutbox slot drop -c FILE [--yes]\n"
      "       pgoutbox republish -c FILE --table T --where PREDICATE [--dry-run]\n"
      "       pgoutbox config validate FILE\n"
      "       pgoutbox config from-debezium CONNECTOR.json [--worker WORKER.properties]\n"
      "       pgoutbox config-reference | --version | --help\n",
      stderr);
  return kExitUsage;
}
