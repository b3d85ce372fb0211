#pragma once

// Loading the configuration for an operator's command (`check`, `status`, `slot drop`): the
// loader's message on stderr when it refuses, and nothing else, so each command decides only
// what it does with a valid one.

#include <optional>
#include <string>

#include "pgoutbox/config/config.h"

namespace pgoutbox::app {

// nullopt after printing why the configuration is invalid (the command then exits kExitConfig).
std::optional<config::Config> load_config_or_report(const std::string& config_path);

}  // namespace pgoutbox::app
