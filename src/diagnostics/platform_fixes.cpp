// Each platform's fix in its own documentation's words: Amazon RDS "Performing logical
// replication for Amazon RDS for PostgreSQL" (rds.logical_replication in a custom DB parameter
// group, a static parameter, then a reboot; GRANT rds_replication), Amazon Aurora "Setting up
// logical replication for your Aurora PostgreSQL DB cluster" (the DB cluster parameter group),
// Cloud SQL "Set up logical replication and decoding" (the cloudsql.logical_decoding flag;
// ALTER USER ... WITH REPLICATION as a cloudsqlsuperuser), Azure "Logical replication and logical
// decoding in Azure Database for PostgreSQL flexible server" (the wal_level server parameter;
// replication permissions for the admin user), Supabase "Roles, superuser access" (the postgres
// role has REPLICATION), Neon "Logical replication in Neon" (the project's Logical Replication
// switch; neon_superuser has REPLICATION).
#include "platform_fixes.h"

#include <fmt/format.h>

namespace pgoutbox::diagnostics::detail {
namespace {

std::string current(const ServerSignals& signals, const std::string& name) {
  const auto it = signals.settings.find(name);
  return it == signals.settings.end() ? std::string() : fmt::format(" (it is {} now)", it->second);
}

}  // namespace

std::string wal_level_fix(Platform platform, const ServerSignals& signals) {
  switch (platform) {
    case Platform::self_managed:
      return "as a superuser run ALTER SYSTEM SET wal_level = logical (or set it in postgresql.conf), then restart "
             "PostgreSQL.";
    case Platform::rds:
      return fmt::format(
          "Amazon RDS sets wal_level from rds.logical_replication{}: set rds.logical_replication = 1 in the instance's "
          "custom DB parameter group (a static parameter), then reboot the instance.",
          current(signals, "rds.logical_replication"));
    case Platform::aurora:
      return fmt::format(
          "Amazon Aurora sets wal_level from rds.logical_replication{}: set rds.logical_replication = 1 in the "
          "cluster's custom DB cluster parameter group, then reboot the writer instance.",
          current(signals, "rds.logical_replication"));
    case Platform::cloud_sql:
      return fmt::format(
          "Cloud SQL sets wal_level from the database flag cloudsql.logical_decoding{}: set it to on (console: Edit, "
          "Flags; gcloud sql instances patch --database-flags replaces every flag, so repeat the others); the "
          "instance restarts.",
          current(signals, "cloudsql.logical_decoding"));
    case Platform::azure_flexible:
      return "set the server parameter wal_level to logical (Azure portal: Server parameters; or az postgres "
             "flexible-server parameter set --name wal_level --value logical), save, then restart the server.";
    case Platform::supabase:
      return "Supabase runs its projects with wal_level = logical and the setting is not the project's to change: ask "
             "Supabase support.";
    case Platform::neon:
      return "enable logical replication in the Neon Console (the project's settings, Logical Replication, Enable): "
             "it sets wal_level to logical for every compute of the project and restarts them; it cannot be turned "
             "off again.";
  }
  return {};
}

std::string server_setting_fix(Platform platform, std::string_view setting) {
  switch (platform) {
    case Platform::self_managed:
      return fmt::format("raise {} (ALTER SYSTEM, then restart PostgreSQL)", setting);
    case Platform::rds:
      return fmt::format("raise {} in the instance's custom DB parameter group, then reboot the instance", setting);
    case Platform::aurora:
      return fmt::format("raise {} in the cluster's custom DB cluster parameter group, then reboot the writer instance",
                         setting);
    case Platform::cloud_sql:
      return fmt::format("raise the database flag {} (the instance restarts)", setting);
    case Platform::azure_flexible:
      return fmt::format("raise the server parameter {} (Azure portal: Server parameters), then restart the server",
                         setting);
    case Platform::supabase:
      return fmt::format("ask Supabase support to raise {} (the project's roles cannot change it)", setting);
    case Platform::neon:
      return fmt::format("ask Neon to raise {} (Neon sets it for each compute)", setting);
  }
  return {};
}

std::string replication_right_fix(Platform platform, const std::string& quoted_user) {
  switch (platform) {
    case Platform::self_managed:
      return fmt::format(
          "as a superuser: ALTER ROLE {} REPLICATION; (or use the least-privilege role of sql/role.sql).", quoted_user);
    case Platform::rds:
    case Platform::aurora:
      return fmt::format(
          "as the master user (a member of rds_superuser): GRANT rds_replication TO {}; (Amazon RDS grants the right "
          "to replicate through that role, not through the REPLICATION attribute).",
          quoted_user);
    case Platform::cloud_sql:
      return fmt::format(
          "as a member of cloudsqlsuperuser (such as the postgres user): ALTER USER {} WITH REPLICATION;", quoted_user);
    case Platform::azure_flexible:
      return fmt::format("as the server's admin user (a member of azure_pg_admin): ALTER ROLE {} REPLICATION;",
                         quoted_user);
    case Platform::supabase:
      return fmt::format(
          "connect as the postgres role, which has REPLICATION on Supabase, or as postgres: ALTER ROLE {} REPLICATION;",
          quoted_user);
    case Platform::neon:
      return fmt::format(
          "use a role created in the Neon Console, CLI or API (a member of neon_superuser, which has REPLICATION), or "
          "as such a role: ALTER ROLE {} REPLICATION;",
          quoted_user);
  }
  return {};
}

std::optional<std::string> replication_role(Platform platform) {
  if (platform == Platform::rds || platform == Platform::aurora) return "rds_replication";
  return std::nullopt;
}

}  // namespace pgoutbox::diagnostics::detail
