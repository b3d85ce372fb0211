#include "connect_standalone.h"

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace pgoutbox::test {
namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out.good()) throw std::runtime_error("cannot write " + path);
}

std::string properties(const ConnectorSettings& settings) {
  std::string out;
  for (const auto& [key, value] : settings) out += key + "=" + value + "\n";
  return out;
}

}  // namespace

std::string debezium_libs() {
  if (const char* dir = std::getenv("PGOUTBOX_DEBEZIUM_LIBS"); dir != nullptr && *dir != '\0') return dir;
  return PGOUTBOX_DEBEZIUM_LIBS;
}

ConnectStandalone::ConnectStandalone(const std::string& dir, const std::string& bootstrap,
                                     const ConnectorSettings& worker, const std::vector<ConnectorSettings>& connectors)
    : log_(dir + "/connect.log"), child_(start(dir, bootstrap, worker, connectors, log_)) {}

ChildProcess ConnectStandalone::start(const std::string& dir, const std::string& bootstrap,
                                      const ConnectorSettings& worker, const std::vector<ConnectorSettings>& connectors,
                                      const std::string& log) {
  auto settings = worker;
  settings["bootstrap.servers"] = bootstrap;
  settings["offset.storage.file.filename"] = dir + "/offsets";
  settings["offset.flush.interval.ms"] = "1000";
  settings["plugin.discovery"] = "service_load";
  settings["listeners"] = "http://127.0.0.1:0";
  write(dir + "/worker.properties", properties(settings));
  write(dir + "/log4j2.properties",
        "rootLogger.level=warn\nrootLogger.appenderRef.out.ref=out\nappender.out.type=Console\n"
        "appender.out.name=out\nappender.out.layout.type=PatternLayout\nappender.out.layout.pattern=%p %c{1}: %m%n\n");
  std::vector<std::string> argv = {PGOUTBOX_JAVA,
                                   "-Xmx512M",
                                   "-Dlog4j2.configurationFile=" + dir + "/log4j2.properties",
                                   "-Djava.io.tmpdir=" + dir,
                                   "-cp",
                                   debezium_libs() + "/*",
                                   "org.apache.kafka.connect.cli.ConnectStandalone",
                                   dir + "/worker.properties"};
  for (std::size_t i = 0; i < connectors.size(); ++i) {
    const std::string path = dir + "/connector-" + std::to_string(i) + ".properties";
    write(path, properties(connectors[i]));
    argv.push_back(path);
  }
  return ChildProcess({.argv = argv, .log_path = log, .run_as = std::nullopt, .extra_env = {}});
}

bool ConnectStandalone::stop() {
  child_.signal_leader(SIGTERM);
  return child_.wait(std::chrono::seconds(60)).has_value();
}

ConnectorSettings outbox_connector(const std::string& name, int port, const std::string& slot,
                                   const std::string& publication, const std::string& tables) {
  return {{"name", name},
          {"connector.class", "io.debezium.connector.postgresql.PostgresConnector"},
          {"tasks.max", "1"},
          {"database.hostname", "127.0.0.1"},
          {"database.port", std::to_string(port)},
          {"database.user", "postgres"},
          {"database.dbname", "postgres"},
          {"topic.prefix", name},
          {"plugin.name", "pgoutput"},
          {"slot.name", slot},
          {"publication.name", publication},
          {"publication.autocreate.mode", "disabled"},
          {"snapshot.mode", "no_data"},
          {"table.include.list", tables},
          {"transforms", "outbox"},
          {"transforms.outbox.type", "io.debezium.transforms.outbox.EventRouter"}};
}

std::string connector_json(const ConnectorSettings& settings) {
  const auto name = settings.find("name");
  std::string out =
      "{\"name\": \"" + (name == settings.end() ? std::string("connector") : name->second) + "\", \"config\": {";
  for (const auto& [key, value] : settings) {
    out += (out.back() == '{' ? "" : ", ") + ("\"" + key + "\": \"" + value + "\"");
  }
  return out + "}}";
}

}  // namespace pgoutbox::test
