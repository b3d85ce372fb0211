// Recognising a managed platform from the settings, roles and functions a server shows, and a
// pooler from its endpoint or its answer, without services (docs/managed-postgres.md).
#include "pgoutbox/diagnostics/platform.h"

#include <gtest/gtest.h>

namespace pgoutbox::diagnostics {
namespace {

TEST(PlatformTest, NothingPlatformLikeIsSelfManaged) {
  const auto found = recognise({.settings = {}, .roles = {}, .functions = {}});
  EXPECT_EQ(found.platform, Platform::self_managed);
  EXPECT_EQ(found.evidence, "");
}

TEST(PlatformTest, EachPlatformIsToldByItsOwnSettingOrRole) {
  const auto platform = [](ServerSignals s) { return recognise(s).platform; };
  EXPECT_EQ(platform({.settings = {{"rds.extensions", "aws_s3"}}, .roles = {}, .functions = {}}), Platform::rds);
  EXPECT_EQ(platform({.settings = {}, .roles = {"rds_superuser"}, .functions = {}}), Platform::rds);
  EXPECT_EQ(platform({.settings = {{"cloudsql.iam_authentication", "off"}}, .roles = {}, .functions = {}}),
            Platform::cloud_sql);
  EXPECT_EQ(platform({.settings = {}, .roles = {"cloudsqlsuperuser"}, .functions = {}}), Platform::cloud_sql);
  EXPECT_EQ(platform({.settings = {{"azure.extensions", ""}}, .roles = {}, .functions = {}}), Platform::azure_flexible);
  EXPECT_EQ(platform({.settings = {}, .roles = {"azure_pg_admin"}, .functions = {}}), Platform::azure_flexible);
  EXPECT_EQ(platform({.settings = {}, .roles = {"supabase_admin"}, .functions = {}}), Platform::supabase);
  EXPECT_EQ(platform({.settings = {{"neon.timeline_id", "f00d"}}, .roles = {}, .functions = {}}), Platform::neon);
  EXPECT_EQ(platform({.settings = {}, .roles = {"neon_superuser"}, .functions = {}}), Platform::neon);
  // Aurora shows RDS's settings and roles; aurora_version() tells it apart.
  EXPECT_EQ(platform({.settings = {{"rds.logical_replication", "off"}},
                      .roles = {"rds_superuser"},
                      .functions = {"aurora_version"}}),
            Platform::aurora);
  // aurora_version() alone, without RDS's marks, is nobody's.
  EXPECT_EQ(platform({.settings = {}, .roles = {}, .functions = {"aurora_version"}}), Platform::self_managed);
}

TEST(PlatformTest, TheEvidenceNamesWhatGaveItAway) {
  const auto found = recognise({.settings = {{"rds.extensions", "aws_s3"}, {"rds.logical_replication", "off"}},
                                .roles = {"rds_superuser", "rds_replication"},
                                .functions = {}});
  EXPECT_EQ(found.evidence, "setting rds.extensions, setting rds.logical_replication, role rds_superuser");
  EXPECT_EQ(platform_name(found.platform), "Amazon RDS for PostgreSQL");
}

TEST(PlatformTest, EverySignalLookedForBelongsToARecognisedPlatform) {
  for (const auto name : kPlatformSettings) {
    EXPECT_NE(recognise({.settings = {{std::string(name), "x"}}, .roles = {}, .functions = {}}).platform,
              Platform::self_managed)
        << name;
  }
  for (const auto name : kPlatformRoles) {
    if (name == "rds_replication") continue;  // read for the role check, not a mark of its own
    EXPECT_NE(recognise({.settings = {}, .roles = {std::string(name)}, .functions = {}}).platform,
              Platform::self_managed)
        << name;
  }
}

TEST(PlatformTest, PoolerEndpointsAreToldByTheirAddress) {
  const auto neon = pooler_endpoint("ep-cool-darkness-123456-pooler.us-east-2.aws.neon.tech", "5432");
  ASSERT_TRUE(neon.has_value());
  EXPECT_NE(neon->what.find("Neon's pooled endpoint"), std::string::npos) << neon->what;
  EXPECT_NE(neon->direct.find("(ep-cool-darkness-123456.us-east-2.aws.neon.tech)"), std::string::npos) << neon->direct;
  EXPECT_FALSE(pooler_endpoint("ep-cool-darkness-123456.us-east-2.aws.neon.tech", "5432").has_value());

  const auto supavisor = pooler_endpoint("aws-0-eu-central-1.pooler.supabase.com", "5432");
  ASSERT_TRUE(supavisor.has_value());
  EXPECT_NE(supavisor->direct.find("db.<project-ref>.supabase.co port 5432"), std::string::npos);
  const auto dedicated = pooler_endpoint("db.abcdefghijklmnopqrst.supabase.co", "6543");
  ASSERT_TRUE(dedicated.has_value());
  EXPECT_NE(dedicated->what.find("port 6543"), std::string::npos);
  EXPECT_FALSE(pooler_endpoint("db.abcdefghijklmnopqrst.supabase.co", "5432").has_value());
  EXPECT_FALSE(pooler_endpoint("mydb.abc123.eu-west-1.rds.amazonaws.com", "5432").has_value());
}

TEST(PlatformTest, APoolersAnswerToAReplicationStartupIsRecognised) {
  // PgBouncer before 1.23 refuses the startup parameter; a pooler that drops it hands over an
  // ordinary session, which cannot parse a replication command.
  EXPECT_TRUE(pooler_refusal(
      "cannot connect to PostgreSQL: connection to server at \"127.0.0.1\", port 6432 failed: FATAL:  unsupported "
      "startup parameter: replication"));
  EXPECT_TRUE(pooler_refusal("IDENTIFY_SYSTEM failed: ERROR:  syntax error at or near \"IDENTIFY_SYSTEM\""));
  EXPECT_FALSE(pooler_refusal("FATAL:  must be superuser or replication role to start walsender"));
  EXPECT_FALSE(pooler_refusal("FATAL:  no pg_hba.conf entry for replication connection"));
}

}  // namespace
}  // namespace pgoutbox::diagnostics
