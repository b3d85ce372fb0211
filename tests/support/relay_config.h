#pragma once

// The one builder of the in-process config::Config for tests that run a relay::Session.

#include <string>

#include "pgoutbox/config/config.h"

namespace pgoutbox::test {

// The usual one-table pipeline `name` on `dsn` and `brokers`: table public.<name>, slot
// <name>_slot, publication <name>_pub (created by the relay), topics "<name>.${aggregatetype}",
// status every 200ms, 10s to drain at shutdown. Tests change what they need afterwards.
config::Config relay_config(const std::string& dsn, const std::string& brokers, const std::string& name);

}  // namespace pgoutbox::test
