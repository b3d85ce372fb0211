// docs/configuration.md is generated from the configuration schema (`pgoutbox config-reference`);
// this fails when someone changes a key and forgets to regenerate it, so the two cannot drift.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "pgoutbox/config/schema.h"

namespace {

std::string command_output(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  ::pclose(pipe);
  return out;
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ConfigurationReference, DocsMatchWhatTheSchemaGenerates) {
  const std::string generated = command_output(std::string(PGOUTBOX_BINARY) + " config-reference");
  const std::string committed = file_text(std::string(PGOUTBOX_SOURCE_DIR) + "/docs/configuration.md");
  ASSERT_FALSE(generated.empty()) << "pgoutbox config-reference printed nothing";
  EXPECT_EQ(committed, generated) << "docs/configuration.md differs from the configuration schema; regenerate it with\n"
                                     "  build/release/src/app/pgoutbox config-reference > docs/configuration.md";
}

TEST(ConfigurationReference, EveryKeyOfTheSchemaHasARow) {
  const std::string generated = command_output(std::string(PGOUTBOX_BINARY) + " config-reference");
  for (const auto& key : pgoutbox::config::schema()) {
    EXPECT_NE(generated.find("| `" + key.path + "` |"), std::string::npos) << key.path;
    EXPECT_NE(generated.find("`" + key.env + "`"), std::string::npos) << key.env;
  }
}

}  // namespace
