// `pgoutbox check` against a local Postgres that presents a managed platform's signals: the
// platform's settings as placeholder settings in postgresql.conf, its roles (and Aurora's
// aurora_version()), wal_level replica and an application role without the right to replicate.
// Each platform must be named and its own fixes given instead of ALTER SYSTEM. Then PgBouncer in
// transaction mode in front of it: `check` must say the endpoint is a pooler. One cluster,
// reconfigured and restarted between platforms (docs/managed-postgres.md says what this does
// not prove about the real services).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "operator_fixture.h"
#include "pg_cluster.h"
#include "pgbouncer.h"
#include "pgoutbox_config.h"

namespace pgoutbox::test {
namespace {

struct PlatformCase {
  std::string name;                             // as check names it
  std::map<std::string, std::string> settings;  // placeholder settings, written to platform.conf
  std::string setup_sql;                        // its roles and functions
  std::string teardown_sql;                     // drops them again
  std::vector<std::string> wal_level_fix;       // in the wal_level line's fix
  std::vector<std::string> role_fix;            // in the role line's fix
};

std::vector<PlatformCase> platform_cases() {
  return {
      {"Amazon RDS for PostgreSQL",
       {{"rds.extensions", "aws_s3, pg_stat_statements"}, {"rds.logical_replication", "off"}},
       "CREATE ROLE rds_superuser NOLOGIN; CREATE ROLE rds_replication NOLOGIN",
       "DROP ROLE rds_superuser; DROP ROLE rds_replication",
       {"set rds.logical_replication = 1 in the instance's custom DB parameter group", "(it is off now)",
        "reboot the instance"},
       {"GRANT rds_replication TO \"chk_app\""}},
      {"Amazon Aurora PostgreSQL",
       {{"rds.extensions", "aws_s3"}, {"rds.logical_replication", "off"}},
       "CREATE ROLE rds_superuser NOLOGIN; CREATE ROLE rds_replication NOLOGIN; "
       "CREATE FUNCTION public.aurora_version() RETURNS text LANGUAGE sql AS $$SELECT '15.4.3'$$",
       "DROP ROLE rds_superuser; DROP ROLE rds_replication; DROP FUNCTION public.aurora_version()",
       {"cluster's custom DB cluster parameter group", "reboot the writer instance"},
       {"GRANT rds_replication TO \"chk_app\""}},
      {"Google Cloud SQL for PostgreSQL",
       {{"cloudsql.iam_authentication", "off"}, {"cloudsql.logical_decoding", "off"}},
       "CREATE ROLE cloudsqlsuperuser NOLOGIN",
       "DROP ROLE cloudsqlsuperuser",
       {"database flag cloudsql.logical_decoding (it is off now): set it to on"},
       {"as a member of cloudsqlsuperuser", "ALTER USER \"chk_app\" WITH REPLICATION"}},
      {"Azure Database for PostgreSQL flexible server",
       {{"azure.extensions", "pg_stat_statements"}},
       "CREATE ROLE azure_pg_admin NOLOGIN",
       "DROP ROLE azure_pg_admin",
       {"set the server parameter wal_level to logical", "restart the server"},
       {"admin user (a member of azure_pg_admin): ALTER ROLE \"chk_app\" REPLICATION"}},
      {"Supabase",
       {{"supautils.reserved_roles", "supabase_admin"}},
       "CREATE ROLE supabase_admin NOLOGIN",
       "DROP ROLE supabase_admin",
       {"ask Supabase support"},
       {"connect as the postgres role, which has REPLICATION on Supabase"}},
      {"Neon",
       {{"neon.tenant_id", "4c8bd2cd3fde1b0bdf8d2f2d5ae8e0a1"},
        {"neon.timeline_id", "f1e2d3c4b5a697887766554433221100"}},
       "CREATE ROLE neon_superuser NOLOGIN",
       "DROP ROLE neon_superuser",
       {"enable logical replication in the Neon Console"},
       {"a role created in the Neon Console, CLI or API"}},
  };
}

class CheckPlatformTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // wal_level replica, so that the wal_level finding needs its fix.
    cluster_ = new PgCluster(std::map<std::string, std::string>{{"wal_level", "replica"}});
    std::ofstream(cluster_->data_dir() + "/postgresql.conf", std::ios::app) << "include_if_exists = 'platform.conf'\n";
    cluster_->exec(
        "CREATE ROLE chk_app LOGIN;"
        "CREATE TABLE chk_platform (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text NOT NULL, "
        "aggregateid text NOT NULL, type text, payload jsonb);"
        "CREATE PUBLICATION chk_platform_pub FOR TABLE chk_platform WITH (publish = 'insert')");
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  // The platform's placeholder settings in platform.conf, applied by a restart.
  static void present_settings(const std::map<std::string, std::string>& settings) {
    std::ofstream conf(cluster_->data_dir() + "/platform.conf", std::ios::trunc);
    for (const auto& [name, value] : settings) conf << name << " = '" << value << "'\n";
    conf.close();
    cluster_->restart();
  }

  CommandResult check(const std::string& dsn) {
    // No broker: Kafka's finding blocks, the Postgres findings are what the test reads.
    auto config = pipeline_config(dsn, "127.0.0.1:" + std::to_string(free_loopback_port()), "chk_platform");
    config.create_publication = false;
    config.status_interval.clear();
    const auto path = write_pgoutbox_config(dir_.path() + "/chk_platform.yaml", config);
    return run_pgoutbox(dir_.path(), {"check", "-c", path, "--kafka-timeout", "1"});
  }

  std::string app_dsn() const {
    return "host=127.0.0.1 port=" + std::to_string(cluster_->port()) + " user=chk_app dbname=postgres";
  }

  static PgCluster* cluster_;
  ScratchDir dir_{"check-platform-test", std::nullopt};
};

PgCluster* CheckPlatformTest::cluster_ = nullptr;

TEST_F(CheckPlatformTest, EachPlatformIsNamedWithItsOwnFixesInsteadOfAlterSystem) {
  for (const auto& platform : platform_cases()) {
    SCOPED_TRACE(platform.name);
    present_settings(platform.settings);
    cluster_->exec(platform.setup_sql);
    const auto result = check(app_dsn());
    cluster_->exec(platform.teardown_sql);
    EXPECT_EQ(result.exit_code, 1) << result.output;
    EXPECT_NE(line_starting(result.output, "ok    platform: " + platform.name + " (it shows "), "") << result.output;
    const auto wal_level = line_starting(result.output, "FAIL  wal_level: is replica; logical decoding needs logical.");
    EXPECT_NE(wal_level, "") << result.output;
    for (const auto& part : platform.wal_level_fix) EXPECT_NE(wal_level.find(part), std::string::npos) << wal_level;
    EXPECT_EQ(wal_level.find("ALTER SYSTEM"), std::string::npos) << wal_level;
    const auto role = line_starting(result.output, "FAIL  role chk_app: lacks REPLICATION");
    EXPECT_NE(role, "") << result.output;
    for (const auto& part : platform.role_fix) EXPECT_NE(role.find(part), std::string::npos) << role;
    EXPECT_EQ(role.find("as a superuser"), std::string::npos) << role;
  }
  // Without any platform's signals the fixes are self-managed PostgreSQL's again.
  present_settings({});
  const auto result = check(app_dsn());
  EXPECT_EQ(line_starting(result.output, "ok    platform:"), "") << result.output;
  EXPECT_NE(line_starting(result.output, "FAIL  wal_level:").find("ALTER SYSTEM SET wal_level = logical"),
            std::string::npos)
      << result.output;
  EXPECT_NE(
      line_starting(result.output, "FAIL  role chk_app: lacks REPLICATION").find("ALTER ROLE \"chk_app\" REPLICATION"),
      std::string::npos)
      << result.output;
}

TEST_F(CheckPlatformTest, OnRdsAMemberOfRdsReplicationMayReplicate) {
  present_settings({{"rds.extensions", "aws_s3"}, {"rds.logical_replication", "off"}});
  cluster_->exec("CREATE ROLE rds_superuser NOLOGIN; CREATE ROLE rds_replication NOLOGIN");
  cluster_->exec("GRANT rds_replication TO chk_app");
  const auto result = check(app_dsn());
  cluster_->exec("DROP ROLE rds_superuser; DROP ROLE rds_replication");
  EXPECT_NE(line_starting(result.output,
                          "ok    role chk_app: is a member of rds_replication (Amazon RDS for PostgreSQL's replication "
                          "role)"),
            "")
      << result.output;
  EXPECT_EQ(line_starting(result.output, "FAIL  role chk_app: lacks REPLICATION"), "") << result.output;
}

// Debian 12's PgBouncer (1.18) refuses the startup parameters every pgoutbox connection sends
// (replication, options): even the ordinary connection fails, and `check` says a pooler answered.
TEST_F(CheckPlatformTest, PgBouncerInTransactionModeRefusingTheStartupIsNamedAsAPooler) {
  present_settings({});
  const PgBouncer pooler(cluster_->port(), "transaction");
  const auto result = check(pooler.dsn());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  const auto line = line_starting(result.output, "FAIL  postgres: cannot connect to PostgreSQL:");
  EXPECT_NE(line.find("unsupported startup parameter"), std::string::npos) << result.output;
  EXPECT_NE(line.find("the endpoint is a connection pooler, not PostgreSQL"), std::string::npos) << line;
  EXPECT_NE(line.find("Fix: point postgres.dsn at PostgreSQL itself"), std::string::npos) << line;
}

// A pooler that drops the parameters instead (PgBouncer told to ignore them; Supavisor has been
// seen doing the same) passes the ordinary connection and hands the replication connection an
// ordinary session: IDENTIFY_SYSTEM is a syntax error there, and `check` names the pooler.
TEST_F(CheckPlatformTest, APoolerThatDropsTheReplicationParameterIsNamedAtTheReplicationConnection) {
  present_settings({});
  const PgBouncer pooler(cluster_->port(), "transaction", "replication, options");
  const auto result = check(pooler.dsn());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(line_starting(result.output, "ok    postgres: connected to"), "") << result.output;
  const auto line = line_starting(result.output,
                                  "FAIL  replication connection: cannot be opened: the endpoint is a connection "
                                  "pooler, which cannot carry a replication connection");
  EXPECT_NE(line, "") << result.output;
  EXPECT_NE(line.find("syntax error at or near \"IDENTIFY_SYSTEM\""), std::string::npos) << line;
  EXPECT_NE(line.find("Fix: point postgres.dsn at PostgreSQL itself"), std::string::npos) << line;

  // Straight to the server, the same role's replication connection opens.
  const auto direct = check(cluster_->dsn());
  EXPECT_NE(line_starting(direct.output, "ok    replication connection: opens"), "") << direct.output;
}

}  // namespace
}  // namespace pgoutbox::test
