// The README's quickstart, run as written: the fenced block after the "quickstart" marker is
// taken from README.md and run with bash against the test's own Postgres and Kafka, their
// addresses given through the variables the block itself reads (PGHOST, PGPORT, KAFKA, ...).
// So the README cannot drift from what works.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "child_process.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The lines of the first ```sh block after the marker line.
std::string quickstart_block(const std::string& readme) {
  std::istringstream in(readme);
  std::string line;
  std::string block;
  bool marked = false;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!marked) {
      marked = line.rfind("<!-- quickstart:", 0) == 0;
      continue;
    }
    if (!inside) {
      inside = line == "```sh";
      continue;
    }
    if (line == "```") return block;
    block += line + "\n";
  }
  return {};
}

TEST(Quickstart, TheReadmesCommandsRunAsWritten) {
  const std::string block = quickstart_block(read_text(fs::path(PGOUTBOX_SOURCE_DIR) / "README.md"));
  ASSERT_FALSE(block.empty()) << "no quickstart block after the marker in README.md";

  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();
  ScratchDir dir("quickstart", std::nullopt);
  // The block runs from a clone's top folder: the same relative paths, pointing at this tree.
  const fs::path top(dir.path());
  fs::create_symlink(fs::path(PGOUTBOX_SOURCE_DIR) / "sql", top / "sql");
  fs::create_symlink(fs::path(PGOUTBOX_SOURCE_DIR) / "config", top / "config");
  fs::create_directories(top / "build/release/src/app");
  fs::create_symlink(PGOUTBOX_BINARY, top / "build/release/src/app/pgoutbox");
  std::ofstream(top / "quickstart.sh") << block;

  ChildProcess shell({.argv = {"/bin/bash", "-c", "cd '" + dir.path() + "' && exec bash -euo pipefail quickstart.sh"},
                      .log_path = dir.path() + "/quickstart.log",
                      .run_as = std::nullopt,
                      .extra_env = {"PGHOST=127.0.0.1", "PGPORT=" + std::to_string(pg.port()), "PGUSER=postgres",
                                    "PGDATABASE=quickstart", "KAFKA=" + kafka.bootstrap(),
                                    "PATH=" + std::string(PGOUTBOX_PG_BINDIR) + ":/usr/local/bin:/usr/bin:/bin"}});
  const auto status = shell.wait(240s);
  const std::string output = read_text(dir.path() + "/quickstart.log");
  const std::string log = read_text(dir.path() + "/pgoutbox.log");
  ASSERT_TRUE(status) << "the quickstart did not finish:\n" << output << "\npgoutbox.log:\n" << log;
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << output << "\npgoutbox.log:\n" << log;
  EXPECT_NE(output.find("ready: "), std::string::npos) << "check said ready:\n" << output;
  EXPECT_NE(output.find("key 42, headers id="), std::string::npos) << "the record in Kafka:\n" << output;
  EXPECT_NE(output.find("type=OrderPlaced: {\"total\": 9.5}"), std::string::npos) << output;
  EXPECT_NE(log.find("streaming from slot pgoutbox"), std::string::npos) << "logs on stderr:\n" << log;
}

}  // namespace
}  // namespace pgoutbox::test
