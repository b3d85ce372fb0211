#pragma once

// What each managed platform calls the fixes `check` names: where its server settings live (a
// parameter group, a database flag, a server parameter, a console switch) and which role may
// give another the right to replicate. Self-managed PostgreSQL gets ALTER SYSTEM and ALTER ROLE.

#include <optional>
#include <string>
#include <string_view>

#include "pgoutbox/diagnostics/platform.h"

namespace pgoutbox::diagnostics::detail {

// How to reach wal_level = logical; names the platform's own switch and, when the server shows
// it, its current value.
std::string wal_level_fix(Platform platform, const ServerSignals& signals);

// Where `setting` (max_replication_slots, max_wal_senders) is raised, and what restarts then.
std::string server_setting_fix(Platform platform, std::string_view setting);

// How role `quoted_user` gets the right to open a replication connection.
std::string replication_right_fix(Platform platform, const std::string& quoted_user);

// The platform role whose members may replicate without the REPLICATION attribute: Amazon RDS
// and Aurora grant it through rds_replication. nullopt elsewhere.
std::optional<std::string> replication_role(Platform platform);

}  // namespace pgoutbox::diagnostics::detail
