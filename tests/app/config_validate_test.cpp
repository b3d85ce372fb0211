// `pgoutbox config validate FILE` as deployment tooling runs it: the loader's verdict and exit
// code, and nothing connected (the DSN and brokers below name ports nothing listens on).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "../ops/command.h"
#include "child_process.h"

namespace {

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

Result pgoutbox(const std::string& args) {
  // env -u: a PGOUTBOX_* variable of the caller's would otherwise override the file.
  auto run =
      pgoutbox::test::run_command("env -u PGOUTBOX_POSTGRES_PASSWORD " + std::string(PGOUTBOX_BINARY) + " " + args);
  return {run.status, std::move(run.output)};
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class ConfigValidate : public ::testing::Test {
 protected:
  void SetUp() override { std::filesystem::create_directories(dir_.path() + "/secrets"); }
  std::string write(const std::string& name, const std::string& text) {
    return pgoutbox::test::write_file(dir_.path(), name, text);
  }

  pgoutbox::test::ScratchDir dir_{"validate", std::nullopt};
};

constexpr const char* kValid = R"(postgres:
  dsn: "host=127.0.0.1 port=1 dbname=app user=pgoutbox"
  password_file: secrets/password
  slot: orders
kafka:
  brokers: "127.0.0.1:1"
tables:
  - table: public.outbox
)";

TEST_F(ConfigValidate, AValidFileIsReportedWithItsSlotAndExitsZero) {
  write("secrets/password", "pw-41\n");
  const auto r = pgoutbox("config validate " + write("pgoutbox.yaml", kValid));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "valid: slot orders, publication pgoutbox, 1 table(s)")) << r.output;
  EXPECT_FALSE(has(r.output, "pw-41")) << r.output;
}

TEST_F(ConfigValidate, TheExampleConfigurationIsValid) {
  const auto r = pgoutbox(std::string("config validate ") + PGOUTBOX_SOURCE_DIR + "/config/pgoutbox.example.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// A secret file the configuration names must exist: a chart that mounts the Secret at another
// path than the configuration says fails here, not at the pod's first start.
TEST_F(ConfigValidate, AMissingSecretFileIsInvalid) {
  const auto r = pgoutbox("config validate " + write("pgoutbox.yaml", kValid));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "postgres.password_file")) << r.output;
}

TEST_F(ConfigValidate, AWrongValueIsNamedWithItsKeyAndExitsTwo) {
  write("secrets/password", "pw\n");
  const auto r =
      pgoutbox("config validate " + write("pgoutbox.yaml", std::string(kValid) + "limits:\n  resume_ratio: 1.5\n"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "limits.resume_ratio")) << r.output;
}

TEST_F(ConfigValidate, AMisspeltKeyIsInvalid) {
  write("secrets/password", "pw\n");
  const auto r = pgoutbox("config validate " + write("pgoutbox.yaml", std::string(kValid) + "shutdown_timout: 30s\n"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "shutdown_timout")) << r.output;
}

// A password written in the file would sit in a ConfigMap or a repository: refused in either DSN
// (postgres.primary_dsn uses the same password as postgres.dsn), naming the key and where the
// password goes instead, and never printed.
TEST_F(ConfigValidate, APasswordInEitherDsnOfTheFileIsInvalidAndNamesWhereItGoes) {
  for (const std::string key : {"dsn", "primary_dsn"}) {
    for (const std::string dsn : {"host=127.0.0.1 port=1 user=pgoutbox password=hunter2-41",
                                  "postgresql://pgoutbox:hunter2-41@127.0.0.1:1/app"}) {
      // kValid without its password file, with the key's line: its dsn replaced, or a
      // primary_dsn added after it.
      std::string text = kValid;
      const std::string password_file = "  password_file: secrets/password\n";
      text.erase(text.find(password_file), password_file.size());
      const std::string line = "  dsn: \"host=127.0.0.1 port=1 dbname=app user=pgoutbox\"\n";
      text.replace(text.find(line), line.size(),
                   key == "dsn" ? "  dsn: \"" + dsn + "\"\n" : line + "  primary_dsn: \"" + dsn + "\"\n");
      const std::string file = write("pgoutbox.yaml", text);
      const auto r = pgoutbox("config validate " + file);
      EXPECT_EQ(r.exit_code, 2) << key << ": " << dsn << "\n" << r.output;
      EXPECT_TRUE(has(r.output, "postgres." + key + ": holds a password")) << r.output;
      EXPECT_TRUE(has(r.output, "PGOUTBOX_POSTGRES_PASSWORD")) << r.output;
      EXPECT_TRUE(has(r.output, "postgres.password_file")) << r.output;
      EXPECT_FALSE(has(r.output, "hunter2-41")) << r.output;
    }
  }
}

TEST_F(ConfigValidate, NoFileIsAWrongCommandLine) {
  EXPECT_EQ(pgoutbox("config validate").exit_code, 64);
  EXPECT_EQ(pgoutbox("config validate " + dir_.path() + "/absent.yaml").exit_code, 2);
}

}  // namespace
