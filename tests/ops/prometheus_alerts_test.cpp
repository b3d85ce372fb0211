// deploy/prometheus/alerts.yaml in a real Prometheus (Debian's, on loopback, a 1 s scrape and
// evaluation interval, its own directory) scraping a real pgoutbox: with Kafka stopped and more
// outbox rows than the in-flight cap, PgoutboxKafkaDown and PgoutboxPaused go pending, then
// firing; once Kafka is back and the rows are delivered, both resolve (and the commit-to-ack
// p99 alert fires: those rows waited out the outage). No other alert fires along the way. The
// rules are the shipped expressions with every `for:` shortened to 3 s, so the test takes seconds.
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "command.h"
#include "eventually.h"
#include "http_get.h"
#include "pgoutbox_config.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

// alertname -> state ("pending" / "firing") of the alerts Prometheus holds now.
std::map<std::string, std::string> active_alerts(int port) {
  std::map<std::string, std::string> out;
  const auto response = http_get("127.0.0.1", port, "/api/v1/alerts");
  if (response.status != 200) return out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(response.body).get(doc) != simdjson::SUCCESS) return out;
  simdjson::dom::array alerts;
  if (doc["data"]["alerts"].get(alerts) != simdjson::SUCCESS) return out;
  for (auto alert : alerts) {
    std::string_view name, state;
    if (alert["labels"]["alertname"].get(name) == simdjson::SUCCESS && alert["state"].get(state) == simdjson::SUCCESS) {
      auto& slot = out[std::string(name)];
      if (slot != "firing") slot = std::string(state);
    }
  }
  return out;
}

// The annotation `key` of the first alert named `alert` Prometheus holds now ("" if none).
std::string alert_annotation(int port, const std::string& alert, const std::string& key) {
  const auto response = http_get("127.0.0.1", port, "/api/v1/alerts");
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array alerts;
  if (response.status != 200 || parser.parse(response.body).get(doc) != simdjson::SUCCESS ||
      doc["data"]["alerts"].get(alerts) != simdjson::SUCCESS) {
    return "";
  }
  for (auto a : alerts) {
    std::string_view name, value;
    if (a["labels"]["alertname"].get(name) == simdjson::SUCCESS && name == alert &&
        a["annotations"][key].get(value) == simdjson::SUCCESS) {
      return std::string(value);
    }
  }
  return "";
}

std::string describe(const std::map<std::string, std::string>& alerts) {
  std::string out;
  for (const auto& [name, state] : alerts) out += name + ":" + state + " ";
  return out;
}

class PrometheusAlertsTest : public ::testing::Test {
 protected:
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();
  ScratchDir dir{"ops-prometheus", std::nullopt};
  int metrics_port = free_loopback_port();
  int prometheus_port = free_loopback_port();
  std::optional<ChildProcess> pgoutbox;
  std::optional<ChildProcess> prometheus;
  static constexpr const char* kRunbook = "https://runbooks.test/pgoutbox/docs/runbook.md";

  void TearDown() override {
    if (!kafka.running()) kafka.start();
    for (auto* process : {&pgoutbox, &prometheus}) {
      if (*process && (*process)->running()) {
        (*process)->signal_leader(SIGTERM);
        if (!(*process)->wait(30s)) (*process)->kill_and_reap();
      }
    }
  }

  void start_pgoutbox() {
    pg.exec(
        "CREATE TABLE IF NOT EXISTS ops_alerts (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), "
        "aggregatetype text, aggregateid text, type text, payload jsonb)");
    auto config = pipeline_config(pg.dsn(), kafka.bootstrap(), "ops_alerts");
    config.metrics_address = "127.0.0.1:" + std::to_string(metrics_port);
    config.extra_yaml = "limits:\n  max_in_flight_records: 20\n";
    const auto path = write_pgoutbox_config(dir.path() + "/pgoutbox.yaml", config);
    pgoutbox.emplace(ChildProcess::Options{.argv = {PGOUTBOX_BINARY, "run", "-c", path},
                                           .log_path = dir.path() + "/pgoutbox.log",
                                           .run_as = std::nullopt,
                                           .extra_env = {}});
  }

  void start_prometheus() {
    // The shipped rules with short `for:` durations; the expressions are untouched.
    const auto rules =
        std::regex_replace(file_text(std::string(PGOUTBOX_SOURCE_DIR) + "/deploy/prometheus/alerts.yaml"),
                           std::regex(R"(\bfor: [0-9]+[smh])"), "for: 3s");
    std::ofstream(dir.path() + "/alerts.yaml") << rules;
    std::ofstream(dir.path() + "/prometheus.yml") << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                                                  << "  external_labels: {pgoutbox_runbook: \"" << kRunbook << "\"}\n"
                                                  << "rule_files: [\"" << dir.path() << "/alerts.yaml\"]\n"
                                                  << "scrape_configs:\n  - job_name: pgoutbox\n    static_configs:\n"
                                                  << "      - targets: [\"127.0.0.1:" << metrics_port << "\"]\n"
                                                  << "        labels: {slot: ops_alerts_slot}\n";
    prometheus.emplace(ChildProcess::Options{
        .argv = {PGOUTBOX_PROMETHEUS, "--config.file=" + dir.path() + "/prometheus.yml",
                 "--storage.tsdb.path=" + dir.path() + "/data",
                 "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port), "--log.level=warn"},
        .log_path = dir.path() + "/prometheus.log",
        .run_as = std::nullopt,
        .extra_env = {}});
  }

  std::string logs() {
    return "\npgoutbox: " + tail_of(dir.path() + "/pgoutbox.log") +
           "\nprometheus: " + tail_of(dir.path() + "/prometheus.log");
  }
};

TEST_F(PrometheusAlertsTest, KafkaDownAndPausedFireAndResolve) {
  start_pgoutbox();
  start_prometheus();
  PGOUTBOX_ASSERT_EVENTUALLY(http_get("127.0.0.1", metrics_port, "/readyz").status == 200, 60s) << logs();
  PGOUTBOX_ASSERT_EVENTUALLY(http_get("127.0.0.1", prometheus_port, "/-/ready").status == 200, 30s) << logs();
  const auto up = [&] {
    return http_get("127.0.0.1", prometheus_port, "/api/v1/query?query=up%7Bjob%3D%22pgoutbox%22%7D%3D%3D1").body;
  };
  PGOUTBOX_ASSERT_EVENTUALLY(up().find("ops_alerts_slot") != std::string::npos, 30s) << up() << logs();
  // A healthy relay raises nothing (evaluated for longer than the shortened `for:`).
  std::this_thread::sleep_for(5s);
  EXPECT_EQ(active_alerts(prometheus_port), (std::map<std::string, std::string>{})) << logs();

  kafka.stop();
  pg.exec(
      "INSERT INTO ops_alerts (aggregatetype, aggregateid, payload) "
      "SELECT 'E', 'k' || g, jsonb_build_object('n', g) FROM generate_series(1, 100) g");
  std::set<std::string> seen;  // "alert:state" seen along the way
  const auto watch = [&](const std::string& alert, const std::string& state) {
    for (const auto& [name, now] : active_alerts(prometheus_port)) seen.insert(name + ":" + now);
    return seen.count(alert + ":" + state) > 0;
  };
  PGOUTBOX_EXPECT_EVENTUALLY(watch("PgoutboxKafkaDown", "firing") && watch("PgoutboxPaused", "firing"), 60s) << logs();
  EXPECT_TRUE(seen.count("PgoutboxKafkaDown:pending")) << "the alert waits its `for:` first";
  EXPECT_TRUE(seen.count("PgoutboxPaused:pending"));
  // The runbook link is absolute: the external label's URL and the alert's section.
  EXPECT_EQ(alert_annotation(prometheus_port, "PgoutboxKafkaDown", "runbook_url"),
            std::string(kRunbook) + "#pgoutboxkafkadown");
  std::printf("OPS alerts seen while Kafka was down: %s\n",
              [&] {
                std::string all;
                for (const auto& s : seen) all += s + " ";
                return all;
              }()
                  .c_str());

  kafka.start();
  PGOUTBOX_EXPECT_EVENTUALLY(
      sample_sum(http_get("127.0.0.1", metrics_port, "/metrics").body, "pgoutbox_events_published_total") == 100, 90s)
      << logs();
  // Both resolve once the rows are delivered. The rows waited out the outage, so the
  // commit-to-ack p99 over the last 5 minutes is far above 2 s: that alert fires now, rightly.
  const auto resolved = [&] {
    const auto now = active_alerts(prometheus_port);
    for (const auto& [name, state] : now) seen.insert(name + ":" + state);
    return !now.count("PgoutboxKafkaDown") && !now.count("PgoutboxPaused") && now.count("PgoutboxCommitToAckSlow") &&
           now.at("PgoutboxCommitToAckSlow") == "firing";
  };
  PGOUTBOX_EXPECT_EVENTUALLY(resolved(), 60s) << describe(active_alerts(prometheus_port)) << logs();
  // Every metric the rules name is in a real scrape (a renamed metric would silence its alert).
  const auto scrape = http_get("127.0.0.1", metrics_port, "/metrics").body;
  const auto rules = file_text(std::string(PGOUTBOX_SOURCE_DIR) + "/deploy/prometheus/alerts.yaml");
  const std::regex metric(R"(pgoutbox_[a-z0-9_]+)");
  for (auto it = std::sregex_iterator(rules.begin(), rules.end(), metric); it != std::sregex_iterator(); ++it) {
    if (it->str() == "pgoutbox_runbook") continue;  // the external label with the runbook's URL
    EXPECT_TRUE(sample_sum(scrape, it->str()).has_value()) << it->str() << " is not in /metrics";
  }
  // Nothing else fired along the way: no rule misreads a Kafka outage.
  for (const auto& entry : seen) {
    EXPECT_TRUE(entry.rfind("PgoutboxKafkaDown:", 0) == 0 || entry.rfind("PgoutboxPaused:", 0) == 0 ||
                entry.rfind("PgoutboxCommitToAckSlow:", 0) == 0)
        << entry;
  }
}

}  // namespace
}  // namespace pgoutbox::test
