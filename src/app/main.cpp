// The command line: parses it and hands over to the command's module.
#include <CLI/CLI.hpp>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "operator_commands.h"
#include "pgoutbox/version.h"
#include "run_command.h"

int main(int argc, char** argv) {
  using namespace pgoutbox::app;
  CLI::App app{"pgoutbox: relays transactional-outbox rows from a PostgreSQL logical replication slot to Apache Kafka"};
  app.name("pgoutbox");
  app.set_version_flag("--version", std::string("pgoutbox ") + pgoutbox::kVersion);
  app.require_subcommand(0, 1);
  app.footer(
      "Exit codes: 0 done; 1 check found something that blocks, or slot drop refused without --yes; 2 invalid "
      "configuration; 3, 4 and 10-18 run stopped for a cause the operator must fix (README); 5 PostgreSQL cannot be "
      "reached; 6 the slot does not exist; 7 slot drop refused while the slot is active; 64 wrong command line; 130 "
      "run left at once on a second signal.");

  std::string config_path;
  const auto config_option = [&](CLI::App* command) {
    command->add_option("-c,--config", config_path, "the YAML configuration file")->required();
  };
  auto* run = app.add_subcommand("run", "stream until SIGTERM/SIGINT, then stop reading, flush Kafka, confirm, exit 0");
  config_option(run);

  int kafka_timeout_s = 5;
  auto* check = app.add_subcommand("check",
                                   "preflight: server settings, role rights, publication, columns, slot, Kafka and "
                                   "topics; one line per finding with its fix; exit 1 when something blocks");
  config_option(check);
  check->add_option("--kafka-timeout", kafka_timeout_s, "seconds to wait for a Kafka broker to answer (default 5)")
      ->check(CLI::Range(1, 300));

  bool json = false;
  auto* status = app.add_subcommand("status", "the slot: active pid, confirmed LSN, lag and retained WAL in bytes, wal_status");
  config_option(status);
  status->add_flag("--json", json, "one JSON object instead of lines");

  bool yes = false;
  auto* slot = app.add_subcommand("slot", "manage the replication slot");
  slot->require_subcommand(1);
  auto* drop = slot->add_subcommand("drop", "drop the slot (its unconfirmed events are then never relayed); refuses "
                                            "without --yes and while a session streams from it");
  config_option(drop);
  drop->add_flag("--yes", yes, "really drop it");

  // Hidden (no group): writes docs/configuration.md from the configuration schema.
  auto* reference = app.add_subcommand("config-reference", "print the configuration reference (Markdown)")->group("");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive as "errors" whose exit code is 0.
    if (app.exit(e) == 0) return kExitOk;
    return kExitUsage;
  }
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");
  if (run->parsed()) return pgoutbox::app::run(config_path);
  if (check->parsed()) return pgoutbox::app::check(config_path, std::chrono::seconds(kafka_timeout_s));
  if (status->parsed()) return pgoutbox::app::status(config_path, json);
  if (drop->parsed()) return slot_drop(config_path, yes);
  if (reference->parsed()) {
    std::fputs(configuration_reference().c_str(), stdout);
    return kExitOk;
  }
  std::fputs(app.help().c_str(), stdout);
  return kExitOk;
}
