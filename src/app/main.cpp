// The command line: parses it and hands over. Commands arrive with the issues that build them.
#include <CLI/CLI.hpp>

#include "pgoutbox/version.h"

int main(int argc, char** argv) {
  CLI::App app{"pgoutbox: relays transactional-outbox rows from a PostgreSQL logical replication slot to Apache Kafka"};
  app.name("pgoutbox");
  app.set_version_flag("--version", std::string("pgoutbox ") + pgoutbox::kVersion);
  app.require_subcommand(0, 1);
  CLI11_PARSE(app, argc, argv);
  if (app.get_subcommands().empty()) {
    std::fputs(app.help().c_str(), stdout);
  }
  return 0;
}
