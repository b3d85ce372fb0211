// deploy/prometheus/alerts.yaml: promtool accepts it and its unit tests pass (synthetic series,
// deploy/prometheus/alerts_test.yaml), and every alert is shaped for an on-call: a severity, a
// summary naming slot and instance, a runbook_url whose section exists in docs/runbook.md, no
// dependence on the topic label, and a promtool case where it fires and one where it stays quiet.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "command.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

const std::string kRoot = PGOUTBOX_SOURCE_DIR;
const std::string kRules = kRoot + "/deploy/prometheus/alerts.yaml";
const std::string kRuleTests = kRoot + "/deploy/prometheus/alerts_test.yaml";

std::vector<YAML::Node> alert_rules() {
  std::vector<YAML::Node> out;
  for (const auto& group : YAML::LoadFile(kRules)["groups"]) {
    for (const auto& rule : group["rules"]) {
      if (rule["alert"]) out.push_back(rule);
    }
  }
  return out;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

TEST(AlertRules, PromtoolChecksTheRules) {
  const auto result = run_command(std::string(PGOUTBOX_PROMTOOL) + " check rules " + kRules);
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("SUCCESS: " + std::to_string(alert_rules().size()) + " rules found"), std::string::npos)
      << result.output;
}

TEST(AlertRules, PromtoolUnitTestsPass) {
  const auto result = run_command(std::string(PGOUTBOX_PROMTOOL) + " test rules " + kRuleTests);
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("SUCCESS"), std::string::npos) << result.output;
}

TEST(AlertRules, TheIssueListIsCovered) {
  std::set<std::string> names;
  for (const auto& rule : alert_rules()) names.insert(rule["alert"].as<std::string>());
  for (const char* wanted :
       {"PgoutboxDown", "PgoutboxNotStreaming", "PgoutboxKafkaDown", "PgoutboxPaused", "PgoutboxReplicationLagHigh",
        "PgoutboxSlotRetainedWalHigh", "PgoutboxSlotWalUnreserved", "PgoutboxSlotLost", "PgoutboxEventsDeadLettered",
        "PgoutboxEventsSkipped", "PgoutboxDeliveriesFailing", "PgoutboxCommitToAckSlow", "PgoutboxRestartingRepeatedly",
        "PgoutboxSlotClaimedTwice", "PgoutboxStandbyReplayBehind"}) {
    EXPECT_TRUE(names.count(wanted)) << wanted;
  }
}

TEST(AlertRules, EveryAlertHasSeveritySummaryAndARunbookSection) {
  const std::string runbook = file_text(kRoot + "/docs/runbook.md");
  for (const auto& rule : alert_rules()) {
    const auto name = rule["alert"].as<std::string>();
    SCOPED_TRACE(name);
    const auto severity = rule["labels"]["severity"].as<std::string>("");
    EXPECT_TRUE(severity == "critical" || severity == "warning") << severity;
    const auto summary = rule["annotations"]["summary"].as<std::string>("");
    EXPECT_NE(summary.find("$labels.slot"), std::string::npos) << summary;
    if (name != "PgoutboxSlotClaimedTwice") {  // counts instances per slot: no single instance
      EXPECT_NE(summary.find("$labels.instance"), std::string::npos) << summary;
    }
    // The external label's URL when Prometheus has it (docs/operating.md, "Alerts and runbook"), else the
    // relative path; then the section's anchor.
    EXPECT_EQ(rule["annotations"]["runbook_url"].as<std::string>(""),
              "{{ with $externalLabels.pgoutbox_runbook }}{{ . }}{{ else }}docs/runbook.md{{ end }}#" + lower(name));
    EXPECT_NE(runbook.find("\n## " + name + "\n"), std::string::npos) << "no runbook section";
    const auto expr = rule["expr"].as<std::string>();
    EXPECT_EQ(expr.find("topic"), std::string::npos) << "the topic label is bounded and folded; sum over it: " << expr;
  }
}

// The compose stack loads these rules, and its Grafana dashboard shows them: a panel that queries
// Prometheus's ALERTS series with a selector every shipped alert matches.
TEST(AlertRules, TheComposePrometheusLoadsThemAndTheDashboardShowsThem) {
  const auto prometheus = YAML::LoadFile(kRoot + "/docker/prometheus/prometheus.yml");
  ASSERT_EQ(prometheus["rule_files"].size(), 1U);
  EXPECT_EQ(prometheus["rule_files"][0].as<std::string>(), "/etc/prometheus/rules/alerts.yaml");
  EXPECT_NE(file_text(kRoot + "/docker/compose.yaml")
                .find("../deploy/prometheus/alerts.yaml:/etc/prometheus/rules/alerts.yaml"),
            std::string::npos)
      << "the compose file mounts deploy/prometheus where prometheus.yml reads the rules";

  // JSON is YAML: yaml-cpp reads the dashboard.
  const auto dashboard = YAML::LoadFile(kRoot + "/docker/grafana/dashboards/pgoutbox.json");
  std::vector<std::string> alert_queries;
  for (const auto& panel : dashboard["panels"]) {
    for (const auto& target : panel["targets"]) {
      const auto expr = target["expr"].as<std::string>("");
      if (expr.find("ALERTS{") != std::string::npos) alert_queries.push_back(expr);
    }
  }
  ASSERT_EQ(alert_queries.size(), 1U) << "one alerts panel";
  std::smatch m;
  ASSERT_TRUE(std::regex_search(alert_queries[0], m, std::regex(R"re(alertname=~"([^"]+)")re"))) << alert_queries[0];
  const std::regex selector(m[1].str());
  for (const auto& rule : alert_rules()) {
    const auto name = rule["alert"].as<std::string>();
    EXPECT_TRUE(std::regex_match(name, selector)) << name << " is not on the dashboard's alerts panel";
  }
  for (const char* label : {"alertstate", "severity", "slot", "instance"}) {
    EXPECT_NE(alert_queries[0].find(label), std::string::npos) << "the panel shows " << label;
  }
}

// Each alert has a promtool case where it fires (exp_alerts listed) and one where it is
// evaluated and must stay quiet (no exp_alerts): a rule that always or never fires fails one.
TEST(AlertRules, EveryAlertIsTestedFiringAndQuiet) {
  std::map<std::string, std::pair<int, int>> cases;  // alert -> (firing cases, quiet cases)
  for (const auto& test : YAML::LoadFile(kRuleTests)["tests"]) {
    for (const auto& eval : test["alert_rule_test"]) {
      auto& counts = cases[eval["alertname"].as<std::string>()];
      const bool fires = eval["exp_alerts"] && eval["exp_alerts"].size() > 0;
      (fires ? counts.first : counts.second)++;
    }
  }
  for (const auto& rule : alert_rules()) {
    const auto name = rule["alert"].as<std::string>();
    EXPECT_GT(cases[name].first, 0) << name << " has no case where it fires";
    EXPECT_GT(cases[name].second, 0) << name << " has no case where it stays quiet";
  }
}

// The compose stack's Prometheus loads these rules: each rule file its prometheus.yml names is
// mounted from deploy/prometheus/alerts.yaml, and promtool accepts the configuration with the
// mounts resolved.
TEST(AlertRules, ComposePrometheusLoadsThem) {
  const auto compose = YAML::LoadFile(kRoot + "/docker/compose.yaml");
  std::map<std::string, std::string> mounts;  // target in the container -> source on the host
  for (const auto& volume : compose["services"]["prometheus"]["volumes"]) {
    const auto spec = volume.as<std::string>();
    const auto colon = spec.find(':');
    const auto second = spec.find(':', colon + 1);
    mounts[spec.substr(colon + 1, second - colon - 1)] = kRoot + "/docker/" + spec.substr(0, colon);
  }
  auto config = YAML::LoadFile(kRoot + "/docker/prometheus/prometheus.yml");
  ASSERT_TRUE(config["rule_files"] && config["rule_files"].size() > 0);
  for (std::size_t i = 0; i < config["rule_files"].size(); ++i) {
    const auto target = config["rule_files"][i].as<std::string>();
    ASSERT_TRUE(mounts.count(target)) << target << " is not mounted";
    EXPECT_EQ(std::filesystem::canonical(mounts[target]), std::filesystem::canonical(kRules));
    config["rule_files"][i] = mounts[target];
  }
  ScratchDir dir("ops-compose", std::nullopt);
  const auto path = dir.path() + "/prometheus.yml";
  std::ofstream(path) << YAML::Dump(config);
  const auto result = run_command(std::string(PGOUTBOX_PROMTOOL) + " check config " + path);
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("SUCCESS: 1 rule files found"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace pgoutbox::test
