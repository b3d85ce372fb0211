// The command line itself, without services: what a newcomer types first.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

Result pgoutbox(const std::string& args) {
  Result r;
  FILE* pipe = ::popen((std::string(PGOUTBOX_BINARY) + " " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) r.output.append(buffer, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CommandLine, NoArgumentsIsAWrongCommandLineWithTheShortUsage) {
  const auto r = pgoutbox("");
  EXPECT_EQ(r.exit_code, 64) << r.output;
  EXPECT_TRUE(has(r.output, "usage: pgoutbox run|check|status -c FILE")) << r.output;
}

TEST(CommandLine, AnUnknownSlotSubcommandIsNamed) {
  const auto r = pgoutbox("slot frob -c x.yaml");
  EXPECT_EQ(r.exit_code, 64) << r.output;
  EXPECT_TRUE(has(r.output, "unknown subcommand \"frob\"; the one there is: drop")) << r.output;
  const auto bare = pgoutbox("slot");
  EXPECT_EQ(bare.exit_code, 64) << bare.output;
  EXPECT_TRUE(has(bare.output, "a subcommand is needed: drop")) << bare.output;
}

// The converter as an operator runs it: YAML on stdout, what stays behind on stderr, exit 0; exit
// 2 for input that cannot be converted. (The mapping itself: tests/debezium.)
TEST(CommandLine, ConfigFromDebeziumPrintsYamlAndListsWhatItLeavesOut) {
  const auto dir = std::filesystem::temp_directory_path() / ("pgoutbox-cli-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto connector = (dir / "connector.json").string();
  std::ofstream(connector) << R"({"name": "outbox", "config": {
      "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
      "database.hostname": "db", "database.dbname": "app", "database.user": "dbz", "database.password": "pw-77",
      "plugin.name": "pgoutput", "slot.name": "orders_slot", "snapshot.mode": "initial",
      "table.include.list": "public.outbox", "transforms": "outbox",
      "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"}})";
  const auto r = pgoutbox("config from-debezium " + connector);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "slot: orders_slot")) << r.output;
  EXPECT_TRUE(has(r.output, "not carried over: snapshot.mode: ")) << r.output;
  EXPECT_FALSE(has(r.output, "pw-77")) << r.output;
  std::ofstream(connector, std::ios::trunc)
      << R"({"connector.class": "io.debezium.connector.postgresql.PostgresConnector"})";
  const auto refused = pgoutbox("config from-debezium " + connector);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_TRUE(has(refused.output, "no io.debezium.transforms.outbox.EventRouter transform")) << refused.output;
  std::filesystem::remove_all(dir);
  EXPECT_EQ(pgoutbox("config from-debezium").exit_code, 64);
}

TEST(CommandLine, HelpListsConfigReference) {
  const auto r = pgoutbox("--help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "config-reference")) << r.output;
}

TEST(CommandLine, EachVerbsHelpShowsOnlyItsOwnExitCodes) {
  const auto run = pgoutbox("run --help");
  EXPECT_TRUE(has(run.output, "8 stopped by a signal with records unacknowledged")) << run.output;
  EXPECT_TRUE(has(run.output, "17 a mapped column")) << run.output;
  EXPECT_FALSE(has(run.output, "slot drop refused")) << run.output;

  const auto check = pgoutbox("check --help");
  EXPECT_TRUE(has(check.output, "1 something blocks")) << check.output;
  EXPECT_FALSE(has(check.output, "130")) << check.output;
  EXPECT_FALSE(has(check.output, "slot drop")) << check.output;

  const auto drop = pgoutbox("slot drop --help");
  EXPECT_TRUE(has(drop.output, "7 a session holds the slot")) << drop.output;
  EXPECT_FALSE(has(drop.output, "poison")) << drop.output;
}

}  // namespace
