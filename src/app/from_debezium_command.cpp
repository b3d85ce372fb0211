// `pgoutbox config from-debezium CONNECTOR.json`: the converted configuration on stdout, each
// setting left behind on stderr with why.
#include <cstdio>
#include <stdexcept>

#include "operator_commands.h"
#include "pgoutbox/config/loader.h"
#include "pgoutbox/config/regular_file.h"
#include "pgoutbox/debezium/from_debezium.h"
#include "run_command.h"

namespace pgoutbox::app {

int config_from_debezium(const std::string& connector_path, const std::string& worker_path) {
  // A connector configuration is a page of JSON: read with the configuration file's bounds, so
  // that /dev/zero or a FIFO is refused at once rather than exhausting memory or blocking.
  std::string json;
  std::string worker;
  for (const auto& [path, text] : {std::pair{&connector_path, &json}, std::pair{&worker_path, &worker}}) {
    if (path->empty()) continue;
    try {
      *text = config::read_regular_file(*path);
    } catch (const std::runtime_error& e) {
      std::fprintf(stderr, "pgoutbox config from-debezium: %s: %s\n", path->c_str(), e.what());
      return kExitConfig;
    }
  }
  try {
    const auto conversion = debezium::from_debezium(json, worker);
    // What is printed must be what pgoutbox loads: a name Debezium accepts and pgoutbox refuses
    // (a slot name with capitals) is refused here, not at the first start.
    (void)config::load_string(conversion.yaml, "the converted configuration", config::Environment{});
    for (const auto& line : conversion.left_out) {
      std::fprintf(stderr, "pgoutbox config from-debezium: not carried over: %s\n", line.c_str());
    }
    std::fputs(conversion.yaml.c_str(), stdout);
    return kExitOk;
  } catch (const debezium::Unusable& e) {
    std::fprintf(stderr, "pgoutbox config from-debezium: %s: %s\n", connector_path.c_str(), e.what());
  } catch (const config::ConfigError& e) {
    std::fprintf(stderr, "pgoutbox config from-debezium: %s: pgoutbox would refuse the result: %s: %s\n",
                 connector_path.c_str(), e.key().c_str(), e.problem().c_str());
  }
  return kExitConfig;
}

}  // namespace pgoutbox::app
