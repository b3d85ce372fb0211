#include "load_config.h"

#include <fmt/format.h>

#include "pgoutbox/config/loader.h"

namespace pgoutbox::app {

std::optional<config::Config> load_config_or_report(const std::string& config_path) {
  try {
    return config::load(config_path, config::Environment::from_process());
  } catch (const config::ConfigError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return std::nullopt;
  }
}

}  // namespace pgoutbox::app
