// The command line: parses it and hands over to the command's module.
#include <CLI/CLI.hpp>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "pgoutbox/version.h"
#include "run_command.h"

int main(int argc, char** argv) {
  CLI::App app{"pgoutbox: relays transactional-outbox rows from a PostgreSQL logical replication slot to Apache Kafka"};
  app.name("pgoutbox");
  app.set_version_flag("--version", std::string("pgoutbox ") + pgoutbox::kVersion);
  app.require_subcommand(0, 1);

  std::string config_path;
  auto* run = app.add_subcommand("run", "stream until SIGTERM/SIGINT, then stop reading, flush Kafka, confirm, exit 0");
  run->add_option("-c,--config", config_path, "the YAML configuration file")->required()->check(CLI::ExistingFile);

  CLI11_PARSE(app, argc, argv);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");
  if (run->parsed()) return pgoutbox::app::run(config_path);
  std::fputs(app.help().c_str(), stdout);
  return 0;
}
