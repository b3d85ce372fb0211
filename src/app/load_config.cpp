#include "load_config.h"

#include <fmt/format.h>

#include "pgoutbox/config/loader.h"
#include "pgoutbox/config/redact.h"
#include "pgoutbox/secrets.h"

namespace pgoutbox::app {

std::optional<config::Config> load_config_or_report(const std::string& config_path) {
  try {
    auto config = config::load(config_path, config::Environment::from_process());
    // From here on, no libpq or librdkafka message this command prints can carry a secret.
    remember_secrets(config::secrets_of(config));
    config::forget_secret_variables();
    return config;
  } catch (const config::ConfigError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return std::nullopt;
  }
}

}  // namespace pgoutbox::app
