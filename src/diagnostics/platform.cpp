// Recognising a managed PostgreSQL service from what it shows any role. Each signal belongs to
// one platform's own documentation: rds.extensions and rds.logical_replication and the roles
// rds_superuser and rds_replication (Amazon RDS, "Working with parameters on your RDS for
// PostgreSQL DB instance"), aurora_version() (Amazon Aurora, "Aurora versioning"), the
// cloudsql.* flags and cloudsqlsuperuser (Cloud SQL, "Configure database flags"),
// azure.extensions and azure_pg_admin (Azure Database for PostgreSQL flexible server, "Server
// parameters"), supabase_admin and the supautils settings (Supabase, "Postgres Roles"), and the
// neon.* settings and neon_superuser (Neon, "Manage roles").
#include "pgoutbox/diagnostics/platform.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace pgoutbox::diagnostics {

const std::vector<std::string_view> kPlatformSettings = {
    "rds.extensions",
    "rds.logical_replication",
    "cloudsql.iam_authentication",
    "cloudsql.logical_decoding",
    "azure.extensions",
    "supautils.reserved_roles",
    "neon.tenant_id",
    "neon.timeline_id",
};
const std::vector<std::string_view> kPlatformRoles = {
    "rds_superuser", "rds_replication", "cloudsqlsuperuser", "azure_pg_admin", "supabase_admin", "neon_superuser",
};
const std::vector<std::string_view> kPlatformFunctions = {"aurora_version"};

namespace {

struct Marks {
  Platform platform;
  std::string_view setting_prefix;  // any setting starting with it
  std::string_view role;            // the platform's administrators' role
};

// Aurora shows RDS's settings and roles too; its own mark is aurora_version(), looked at first.
constexpr std::array<Marks, 5> kMarks = {{
    {Platform::rds, "rds.", "rds_superuser"},
    {Platform::cloud_sql, "cloudsql.", "cloudsqlsuperuser"},
    {Platform::azure_flexible, "azure.", "azure_pg_admin"},
    {Platform::supabase, "supautils.", "supabase_admin"},
    {Platform::neon, "neon.", "neon_superuser"},
}};

}  // namespace

Recognition recognise(const ServerSignals& signals) {
  for (const auto& marks : kMarks) {
    std::vector<std::string> evidence;
    for (const auto& [name, value] : signals.settings) {
      if (name.starts_with(marks.setting_prefix)) evidence.push_back("setting " + name);
    }
    if (signals.roles.contains(std::string(marks.role))) evidence.push_back("role " + std::string(marks.role));
    if (evidence.empty()) continue;
    auto platform = marks.platform;
    if (platform == Platform::rds && signals.functions.contains("aurora_version")) {
      platform = Platform::aurora;
      evidence.emplace_back("function aurora_version()");
    }
    return {platform, fmt::format("{}", fmt::join(evidence, ", "))};
  }
  return {};
}

std::string_view platform_name(Platform platform) {
  switch (platform) {
    case Platform::self_managed:
      return "self-managed PostgreSQL";
    case Platform::rds:
      return "Amazon RDS for PostgreSQL";
    case Platform::aurora:
      return "Amazon Aurora PostgreSQL";
    case Platform::cloud_sql:
      return "Google Cloud SQL for PostgreSQL";
    case Platform::azure_flexible:
      return "Azure Database for PostgreSQL flexible server";
    case Platform::supabase:
      return "Supabase";
    case Platform::neon:
      return "Neon";
  }
  return "unknown";
}

std::optional<PoolerEndpoint> pooler_endpoint(const std::string& host, const std::string& port) {
  std::string h = host;
  std::transform(h.begin(), h.end(), h.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // Neon: ep-name-123456-pooler.region.aws.neon.tech; the direct host is the same without -pooler.
  if (const auto at = h.find("-pooler."); at != std::string::npos && h.ends_with(".neon.tech")) {
    return PoolerEndpoint{fmt::format("{} is Neon's pooled endpoint (PgBouncer in transaction mode)", host),
                          fmt::format("Neon's direct endpoint, the same host without -pooler ({})",
                                      host.substr(0, at) + host.substr(at + 7))};
  }
  // Supabase's shared pooler (Supavisor): session mode on 5432, transaction mode on 6543.
  if (h.ends_with(".pooler.supabase.com")) {
    return PoolerEndpoint{fmt::format("{} is Supabase's shared pooler (Supavisor)", host),
                          "Supabase's direct connection, db.<project-ref>.supabase.co port 5432"};
  }
  // Supabase's dedicated pooler (PgBouncer) shares the database's host, on 6543.
  if (port == "6543") {
    return PoolerEndpoint{
        fmt::format("port 6543 of {} is Supabase's transaction-mode pooler port", host),
        "Supabase's direct connection, port 5432 of the database host (db.<project-ref>.supabase.co)"};
  }
  return std::nullopt;
}

bool pooler_refusal(const std::string& error_text) {
  return error_text.find("unsupported startup parameter") != std::string::npos ||
         error_text.find("syntax error at or near \"IDENTIFY_SYSTEM\"") != std::string::npos;
}

}  // namespace pgoutbox::diagnostics
