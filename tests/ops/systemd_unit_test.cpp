// deploy/systemd: both units pass `systemd-analyze verify` without a warning (ExecStart pointed
// at the built binary), score "OK" or better in `systemd-analyze security`, carry the hardening
// the issue names, do not restart on the exit codes a restart cannot fix, and give pgoutbox more
// than shutdown_timeout to stop.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "command.h"
#include "pgoutbox/config/loader.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

namespace fs = std::filesystem;
const std::string kRoot = PGOUTBOX_SOURCE_DIR;
const std::vector<std::string> kUnits = {"pgoutbox.service", "pgoutbox@.service"};

// The value of every `Key=` line of a unit, in order.
std::vector<std::string> values_of(const std::string& unit_text, const std::string& key) {
  std::vector<std::string> out;
  std::istringstream in(unit_text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + "=", 0) == 0) out.push_back(line.substr(key.size() + 1));
  }
  return out;
}

// A copy of the unit whose ExecStart runs the freshly built binary, named as systemd-analyze
// needs it (a template gets an instance name).
std::string unit_copy(const ScratchDir& dir, const std::string& unit) {
  auto text = file_text(kRoot + "/deploy/systemd/" + unit);
  text = std::regex_replace(text, std::regex("/usr/bin/pgoutbox"), PGOUTBOX_BINARY);
  const std::string name = unit == "pgoutbox@.service" ? "pgoutbox@orders.service" : unit;
  std::ofstream(dir.path() + "/" + name) << text;
  return dir.path() + "/" + name;
}

TEST(SystemdUnits, VerifyWithoutWarnings) {
  ScratchDir dir("ops-units", std::nullopt);
  for (const auto& unit : kUnits) {
    const auto result = run_command("systemd-analyze verify --man=no " + unit_copy(dir, unit));
    EXPECT_EQ(result.status, 0) << unit << ": " << result.output;
    EXPECT_EQ(result.output, "") << unit << ": every warning counts (unknown key, unparsable value)";
  }
}

TEST(SystemdUnits, SecurityExposureIsOk) {
  ScratchDir dir("ops-units", std::nullopt);
  for (const auto& unit : kUnits) {
    const auto result = run_command("systemd-analyze security --offline=true --no-pager " + unit_copy(dir, unit));
    std::smatch m;
    ASSERT_TRUE(std::regex_search(result.output, m, std::regex(R"(Overall exposure level for \S+: ([0-9.]+) (\w+))")))
        << result.output;
    const double score = std::stod(m[1]);
    std::printf("OPS systemd-analyze security %s: %.1f %s\n", unit.c_str(), score, m[2].str().c_str());
    EXPECT_LE(score, 1.9) << result.output;
    EXPECT_TRUE(m[2] == "OK" || m[2] == "SAFE") << m[2];
  }
}

TEST(SystemdUnits, HardeningTheIssueAsksFor) {
  for (const auto& unit : kUnits) {
    SCOPED_TRACE(unit);
    const auto text = file_text(kRoot + "/deploy/systemd/" + unit);
    for (const auto& [key, value] :
         std::vector<std::pair<std::string, std::string>>{{"User", "pgoutbox"},
                                                          {"NoNewPrivileges", "yes"},
                                                          {"ProtectSystem", "strict"},
                                                          {"ProtectHome", "yes"},
                                                          {"PrivateTmp", "yes"},
                                                          {"CapabilityBoundingSet", ""},
                                                          {"RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"},
                                                          {"SystemCallFilter", "@system-service"},
                                                          {"Restart", "on-failure"},
                                                          {"EnvironmentFile", "-/etc/default/pgoutbox"}}) {
      const auto values = values_of(text, key);
      EXPECT_NE(std::find(values.begin(), values.end(), value), values.end()) << key << "=" << value;
    }
  }
  EXPECT_EQ(values_of(file_text(kRoot + "/deploy/systemd/pgoutbox@.service"), "ExecStart"),
            std::vector<std::string>{"/usr/bin/pgoutbox run -c /etc/pgoutbox/%i.yaml"});
}

// Codes of `run` that only an operator can fix (docs/operating.md "Exit codes"); 3 (internal error) and 130
// are left to restart. New configuration-type codes belong here and in the units.
TEST(SystemdUnits, RestartIsPreventedOnCodesOnlyAnOperatorFixes) {
  const std::set<int> expected = {2, 4, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 64};
  const auto guide = file_text(kRoot + "/docs/operating.md");
  for (const auto& unit : kUnits) {
    const auto values = values_of(file_text(kRoot + "/deploy/systemd/" + unit), "RestartPreventExitStatus");
    ASSERT_EQ(values.size(), 1U) << unit;
    std::set<int> listed;
    std::istringstream in(values[0]);
    for (int code; in >> code;) listed.insert(code);
    EXPECT_EQ(listed, expected) << unit;
    for (const int code : listed) {
      if (code == 64) continue;  // command-line usage, in the table as well
      EXPECT_NE(guide.find("\n| " + std::to_string(code) + " | "), std::string::npos)
          << code << " not in docs/operating.md";
    }
  }
}

// Exit 8 answers a stop that was asked for, with nothing lost (docs/operating.md "Exit codes"): the unit ends
// inactive, not failed, and Restart=on-failure leaves it stopped.
TEST(SystemdUnits, AStopWithUnacknowledgedRecordsIsASuccess) {
  const auto guide = file_text(kRoot + "/docs/operating.md");
  EXPECT_NE(guide.find("\n| 8 | `run`: stopped by a signal, but `shutdown_timeout` expired"), std::string::npos);
  for (const auto& unit : kUnits) {
    EXPECT_EQ(values_of(file_text(kRoot + "/deploy/systemd/" + unit), "SuccessExitStatus"),
              std::vector<std::string>{"8"})
        << unit;
  }
}

// systemd's "45s" / "2min" (the forms these units use).
std::chrono::seconds systemd_seconds(const std::string& text) {
  std::smatch m;
  if (!std::regex_match(text, m, std::regex(R"(([0-9]+)(s|min))"))) return std::chrono::seconds(-1);
  const long n = std::stol(m[1]);
  return std::chrono::seconds(m[2] == "min" ? n * 60 : n);
}

TEST(SystemdUnits, StopTimeoutExceedsShutdownTimeout) {
  // The example configuration, as the package installs it, through the real loader.
  const auto config = config::load(kRoot + "/config/pgoutbox.example.yaml", config::Environment());
  for (const auto& unit : kUnits) {
    const auto values = values_of(file_text(kRoot + "/deploy/systemd/" + unit), "TimeoutStopSec");
    ASSERT_EQ(values.size(), 1U) << unit;
    EXPECT_GE(systemd_seconds(values[0]) - config.shutdown_timeout, std::chrono::seconds(10))
        << unit << ": room to flush and confirm after shutdown_timeout";
  }
}

}  // namespace
}  // namespace pgoutbox::test
