#pragma once

// Helpers for the configuration tests: load YAML text with a fake environment, capture the
// ConfigError, and write secret files into a scratch folder that is removed afterwards.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>

#include "pgoutbox/config/loader.h"

namespace pgoutbox::config::test {

using Vars = std::map<std::string, std::string>;

// The three required things and nothing else.
inline const std::string kMinimal =
    "postgres:\n"
    "  dsn: host=db dbname=app user=pgoutbox\n"
    "kafka:\n"
    "  brokers: kafka:9092\n"
    "tables:\n"
    "  - table: public.outbox\n";

inline Config load_yaml(const std::string& yaml, Vars env = {}) {
  return load_string(yaml, "config.yaml", Environment(std::move(env)));
}

// The error loading must raise; a load that succeeds fails the test.
inline ConfigError error_of(const std::string& yaml, Vars env = {}) {
  try {
    load_yaml(yaml, std::move(env));
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a ConfigError, but this loaded:\n" << yaml;
  return ConfigError("(loaded)", 0, 0, "", "");
}

class ScratchDir {
 public:
  ScratchDir() {
    std::random_device random;
    path_ = std::filesystem::path(::testing::TempDir()) / ("pgoutbox-config-" + std::to_string(random()));
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string write(const std::string& name, const std::string& content) const {
    const auto file = path_ / name;
    std::ofstream(file, std::ios::binary) << content;
    return file.string();
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace pgoutbox::config::test
