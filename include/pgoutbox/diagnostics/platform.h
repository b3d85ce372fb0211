#pragma once

// Which managed PostgreSQL service a server is, decided from what any role can see of it: the
// platform's own settings (current_setting of a fixed list of names: on the service they are
// real settings, in a test they are placeholder settings), its own roles and functions. And
// whether the endpoint a DSN names is a connection pooler's. `check` uses both to name the
// platform's own fix instead of ALTER SYSTEM (docs/managed-postgres.md).

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace pgoutbox::diagnostics {

enum class Platform { self_managed, rds, aurora, cloud_sql, azure_flexible, supabase, neon };

// What a server shows of itself. Only the names kPlatformSettings, kPlatformRoles and
// kPlatformFunctions list are read; a name absent here is absent on the server.
struct ServerSignals {
  std::map<std::string, std::string> settings;  // name → value, e.g. rds.logical_replication → 0
  std::set<std::string> roles;                  // e.g. rds_superuser
  std::set<std::string> functions;              // e.g. aurora_version
};

// The settings, roles and functions looked for: each is created by exactly one platform.
extern const std::vector<std::string_view> kPlatformSettings;
extern const std::vector<std::string_view> kPlatformRoles;
extern const std::vector<std::string_view> kPlatformFunctions;

struct Recognition {
  Platform platform = Platform::self_managed;
  std::string evidence;  // what gave it away: "setting rds.extensions, role rds_superuser"
};

// The platform `signals` show, self_managed when they show none.
Recognition recognise(const ServerSignals& signals);

// "Amazon RDS for PostgreSQL", "Google Cloud SQL for PostgreSQL", ...
std::string_view platform_name(Platform platform);

// The endpoint is a connection pooler's by its address alone: Neon's pooled host names carry
// "-pooler", Supabase's shared pooler is *.pooler.supabase.com and its transaction mode listens
// on 6543. `what` says which; `direct` names the endpoint that carries a replication connection.
struct PoolerEndpoint {
  std::string what;
  std::string direct;
};
std::optional<PoolerEndpoint> pooler_endpoint(const std::string& host, const std::string& port);

// True when the error a connection ended with is a pooler's answer rather than the server's:
// PgBouncer before 1.23 refuses the startup parameters pgoutbox sends on every connection
// ("unsupported startup parameter: replication", or options); a pooler that drops them hands a
// replication connection an ordinary session, whose parser rejects IDENTIFY_SYSTEM.
bool pooler_refusal(const std::string& error_text);

}  // namespace pgoutbox::diagnostics
