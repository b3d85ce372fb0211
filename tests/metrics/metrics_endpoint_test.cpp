// `pgoutbox run` as a process with metrics_address set: /metrics values move as events flow,
// /healthz and /readyz follow the process, the session and Kafka, the Grafana dashboard's
// queries name metrics a real scrape has, secrets appear in neither logs nor metrics, and every
// log line is JSON.
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>
#include <sys/wait.h>

#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "eventually.h"
#include "http_get.h"
#include "kafka_client.h"
#include "pgoutbox/lsn.h"
#include "pgoutbox_config.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

// Every pgoutbox_[a-z0-9_]+ in a PromQL expression.
std::vector<std::string> metric_names_in(std::string_view expr) {
  std::vector<std::string> names;
  constexpr std::string_view kPrefix = "pgoutbox_";
  for (auto at = expr.find(kPrefix); at != std::string_view::npos; at = expr.find(kPrefix, at)) {
    auto end = at + kPrefix.size();
    while (end < expr.size() &&
           ((expr[end] >= 'a' && expr[end] <= 'z') || (expr[end] >= '0' && expr[end] <= '9') || expr[end] == '_')) {
      ++end;
    }
    names.emplace_back(expr.substr(at, end - at));
    at = end;
  }
  return names;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class MetricsEndpointTest : public ::testing::Test {
 protected:
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();
  ScratchDir dir{"metrics-test", std::nullopt};
  int port = free_loopback_port();
  std::string log_path = dir.path() + "/pgoutbox.log";
  std::optional<ChildProcess> process;

  void TearDown() override {
    if (process && process->running()) {
      process->signal_leader(SIGTERM);
      if (!process->wait(30s)) process->kill_and_reap();
    }
  }

  // A table of its own, a config with the metrics address and JSON logs (auto: stderr is a file).
  std::string write_config(const std::string& name, const std::string& extra = "") {
    pg.exec("CREATE TABLE IF NOT EXISTS " + name +
            " (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text, aggregateid text, type text, payload "
            "jsonb)");
    auto config = pipeline_config(pg.dsn(), kafka.bootstrap(), name);
    config.metrics_address = "127.0.0.1:" + std::to_string(port);
    config.extra_yaml = extra;
    return write_pgoutbox_config(dir.path() + "/" + name + ".yaml", config);
  }

  void start(const std::string& config, std::vector<std::string> env = {}) {
    process.emplace(ChildProcess::Options{.argv = {PGOUTBOX_BINARY, "run", "-c", config},
                                          .log_path = log_path,
                                          .run_as = std::nullopt,
                                          .extra_env = std::move(env)});
  }

  HttpResult get(const std::string& target) { return http_get("127.0.0.1", port, target); }
  std::string scrape() { return get("/metrics").body; }
  double value(const std::string& name, const std::string& labels = "") {
    return sample_sum(scrape(), name, labels).value_or(-1);
  }

  void wait_ready() { PGOUTBOX_ASSERT_EVENTUALLY(get("/readyz").status == 200, 60s); }

  void stop_and_expect_exit_zero() {
    process->signal_leader(SIGTERM);
    const auto status = process->wait(30s);
    ASSERT_TRUE(status) << "pgoutbox did not exit after SIGTERM";
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "status " << *status;
  }

  void insert(const std::string& table, int rows, const std::string& type = "E") {
    pg.exec("INSERT INTO " + table + " (aggregatetype, aggregateid, payload) SELECT '" + type +
            "', 'k' || g, jsonb_build_object('n', g, 'pad', repeat('x', 200)) FROM generate_series(1, " +
            std::to_string(rows) + ") g");
  }
};

TEST_F(MetricsEndpointTest, MetricsMoveAsEventsFlow) {
  start(write_config("m_flow"));
  wait_ready();
  const std::string topic = "topic=\"m_flow.E\"";
  EXPECT_EQ(get("/healthz").status, 200U);
  EXPECT_EQ(value("pgoutbox_streaming"), 1);
  EXPECT_EQ(value("pgoutbox_kafka_up"), 1);
  EXPECT_LT(value("pgoutbox_events_published_total", topic), 1) << "nothing written yet";

  insert("m_flow", 300);
  PGOUTBOX_ASSERT_EVENTUALLY(value("pgoutbox_events_published_total", topic) == 300, 60s);
  auto text = scrape();
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_received_total", topic), 300);
  EXPECT_GE(sample_sum(text, "pgoutbox_commit_to_ack_seconds_count").value_or(0), 300);
  EXPECT_GT(sample_sum(text, "pgoutbox_commit_to_ack_seconds_sum").value_or(0), 0);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_failed_total", topic), 0);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_dead_lettered_total", topic), 0);
  EXPECT_EQ(sample_sum(text, "pgoutbox_build_info"), 1);
  // Everything acknowledged is confirmed: nothing pending, and the confirmed LSN reaches the
  // slot's own confirmed_flush_lsn as Postgres reports it.
  PGOUTBOX_ASSERT_EVENTUALLY(value("pgoutbox_in_flight_events") == 0, 30s);
  const auto slot_confirmed = [&] {
    return static_cast<double>(Lsn::parse(*pg.query_value("SELECT confirmed_flush_lsn FROM pg_replication_slots "
                                                          "WHERE slot_name = 'm_flow_slot'"))
                                   ->value);
  };
  PGOUTBOX_ASSERT_EVENTUALLY(value("pgoutbox_confirmed_lsn") > 0 && value("pgoutbox_confirmed_lsn") <= slot_confirmed(),
                             30s);
  EXPECT_GT(value("pgoutbox_received_lsn"), 0);
  PGOUTBOX_ASSERT_EVENTUALLY(value("pgoutbox_postgres_up") == 1, 30s);
  EXPECT_EQ(value("pgoutbox_slot_active"), 1);
  EXPECT_EQ(value("pgoutbox_slot_wal_status", "status=\"reserved\""), 1);
  EXPECT_GT(value("pgoutbox_slot_retained_wal_bytes"), 0);

  // With Kafka frozen, records stay pending and the slot's lag grows by at least the WAL
  // written since; once Kafka is back, both drain.
  kafka.pause();
  const auto before = *Lsn::parse(*pg.query_value("SELECT pg_current_wal_lsn()"));
  insert("m_flow", 200);
  const auto after = *Lsn::parse(*pg.query_value("SELECT pg_current_wal_lsn()"));
  const double written = static_cast<double>(after.value - before.value);
  PGOUTBOX_EXPECT_EVENTUALLY(value("pgoutbox_in_flight_events") == 200, 30s);
  PGOUTBOX_EXPECT_EVENTUALLY(value("pgoutbox_in_flight_bytes") > 200 * 200, 30s);
  PGOUTBOX_EXPECT_EVENTUALLY(value("pgoutbox_replication_lag_bytes") >= written, 30s);
  kafka.resume();
  PGOUTBOX_ASSERT_EVENTUALLY(value("pgoutbox_events_published_total", topic) == 500, 60s);
  PGOUTBOX_EXPECT_EVENTUALLY(value("pgoutbox_in_flight_events") == 0, 30s);
  PGOUTBOX_EXPECT_EVENTUALLY(value("pgoutbox_replication_lag_bytes") < written, 30s);
  PGOUTBOX_EXPECT_EVENTUALLY(value("pgoutbox_kafka_queue_messages") == 0, 30s);
  PGOUTBOX_EXPECT_EVENTUALLY(sample_sum(scrape(), "pgoutbox_kafka_broker_rtt_p99_seconds").has_value(), 30s);

  // The periodic summary line (every 30 s).
  PGOUTBOX_EXPECT_EVENTUALLY(read_file(log_path).find("summary: ") != std::string::npos, 45s);
  stop_and_expect_exit_zero();
}

TEST_F(MetricsEndpointTest, ReadyzIs503WhileKafkaIsStoppedAnd200After) {
  start(write_config("m_ready"));
  wait_ready();
  kafka.stop();
  PGOUTBOX_EXPECT_EVENTUALLY(get("/readyz").status == 503, 60s);
  const auto not_ready = get("/readyz");
  EXPECT_NE(not_ready.body.find("kafka"), std::string::npos) << not_ready.body;
  EXPECT_EQ(get("/healthz").status, 200U) << "the process is alive";
  EXPECT_EQ(value("pgoutbox_kafka_up"), 0);
  kafka.start();
  PGOUTBOX_EXPECT_EVENTUALLY(get("/readyz").status == 200, 90s);
  insert("m_ready", 5);
  EXPECT_EQ(read_topic(kafka.bootstrap(), "m_ready.E", 5, 60s).size(), 5U);
  stop_and_expect_exit_zero();
  EXPECT_EQ(get("/healthz").status, 0U) << "nothing listens after exit";
}

TEST_F(MetricsEndpointTest, PostgresDownMeansNotReadyAndPostgresUpZero) {
  start(write_config("m_pgdown"));
  wait_ready();
  PGOUTBOX_ASSERT_EVENTUALLY(value("pgoutbox_postgres_up") == 1, 30s);
  pg.stop();
  PGOUTBOX_EXPECT_EVENTUALLY(value("pgoutbox_postgres_up") == 0, 60s);
  const auto not_ready = get("/readyz");
  EXPECT_EQ(not_ready.status, 503U);
  EXPECT_NE(not_ready.body.find("not streaming"), std::string::npos) << not_ready.body;
  pg.start();
  PGOUTBOX_EXPECT_EVENTUALLY(value("pgoutbox_postgres_up") == 1, 60s);
  PGOUTBOX_EXPECT_EVENTUALLY(get("/readyz").status == 200, 90s);
  EXPECT_GE(value("pgoutbox_sessions_started_total"), 2) << "the session reconnected";
  stop_and_expect_exit_zero();
}

// Every metric the provisioned Grafana dashboard queries must exist in a real scrape.
TEST_F(MetricsEndpointTest, EveryMetricTheDashboardQueriesIsExported) {
  const auto dashboard_text = read_file(std::string(PGOUTBOX_SOURCE_DIR) + "/docker/grafana/dashboards/pgoutbox.json");
  simdjson::dom::parser parser;
  simdjson::dom::element dashboard;
  ASSERT_EQ(parser.parse(simdjson::padded_string(dashboard_text)).get(dashboard), simdjson::SUCCESS);
  std::set<std::string> names;
  std::vector<std::string> titles;
  simdjson::dom::array panels;
  ASSERT_EQ(dashboard["panels"].get(panels), simdjson::SUCCESS);
  for (auto panel : panels) {
    std::string_view title;
    ASSERT_EQ(panel["title"].get(title), simdjson::SUCCESS);
    titles.emplace_back(title);
    simdjson::dom::array targets;
    ASSERT_EQ(panel["targets"].get(targets), simdjson::SUCCESS) << title;
    for (auto target : targets) {
      std::string_view expr;
      ASSERT_EQ(target["expr"].get(expr), simdjson::SUCCESS) << title;
      for (auto& name : metric_names_in(expr)) names.insert(std::move(name));
    }
  }
  // The panels the issue asks for.
  for (const auto* wanted : {"Pending", "Published / s", "Failed", "Dead-lettered", "Replication lag", "Retained WAL",
                             "Commit-to-ack latency"}) {
    EXPECT_TRUE(
        std::any_of(titles.begin(), titles.end(), [&](const std::string& t) { return t.rfind(wanted, 0) == 0; }))
        << "no panel " << wanted;
  }
  EXPECT_NE(dashboard_text.find("histogram_quantile(0.99"), std::string::npos);
  ASSERT_GE(names.size(), 10U);

  start(write_config("m_dash"));
  wait_ready();
  insert("m_dash", 10);
  PGOUTBOX_ASSERT_EVENTUALLY(value("pgoutbox_events_published_total") >= 10, 60s);
  // Broker RTT comes with librdkafka's statistics, every 5 s; the slot's with the monitor.
  PGOUTBOX_ASSERT_EVENTUALLY(sample_sum(scrape(), "pgoutbox_kafka_broker_rtt_p99_seconds").has_value(), 30s);
  const auto text = scrape();
  std::set<std::string> exported;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    exported.insert(line.substr(0, line.find_first_of("{ ")));
  }
  for (const auto& name : names) EXPECT_EQ(exported.count(name), 1U) << name << " is queried but not exported";
  stop_and_expect_exit_zero();
}

TEST_F(MetricsEndpointTest, SecretsAppearInNeitherLogsNorMetrics) {
  std::mt19937_64 rng(std::random_device{}());
  const std::string pg_secret = "pg-secret-" + std::to_string(rng());
  const std::string sasl_secret = "sasl-secret-" + std::to_string(rng());
  // Debug level: the effective configuration is logged line by line.
  start(write_config("m_secret", "log_level: debug\n"),
        {"PGOUTBOX_POSTGRES_PASSWORD=" + pg_secret, "PGOUTBOX_KAFKA_PROPERTY_SASL_PASSWORD=" + sasl_secret});
  wait_ready();
  insert("m_secret", 3);
  PGOUTBOX_ASSERT_EVENTUALLY(value("pgoutbox_events_published_total") == 3, 60s);
  const auto text = scrape();
  stop_and_expect_exit_zero();
  const auto log = read_file(log_path);
  EXPECT_NE(log.find("config: "), std::string::npos) << "the configuration was not logged, the test proves nothing";
  for (const auto& secret : {pg_secret, sasl_secret}) {
    EXPECT_EQ(log.find(secret), std::string::npos) << "secret in the log";
    EXPECT_EQ(text.find(secret), std::string::npos) << "secret in /metrics";
  }
}

// metrics_allowed_hosts reaches the server: the relay answers its address and the listed name as
// Host, and refuses a name a DNS-rebinding page would send.
TEST_F(MetricsEndpointTest, OnlyTheAddressOrAListedNameIsAnsweredAsHost) {
  start(write_config("m_host", "metrics_allowed_hosts: \"pgoutbox.monitoring.svc, relay-0\"\n"));
  const auto as = [&](const std::string& host) {
    return http_request("127.0.0.1", port, "GET", "/healthz", 10s, host + ":" + std::to_string(port)).status;
  };
  PGOUTBOX_ASSERT_EVENTUALLY(as("127.0.0.1") == 200, 60s);
  EXPECT_EQ(as("localhost"), 200U);
  EXPECT_EQ(as("pgoutbox.monitoring.svc"), 200U);
  EXPECT_EQ(as("relay-0"), 200U);
  EXPECT_EQ(as("rebind.attacker.example"), 421U);
  EXPECT_EQ(as("relay-1"), 421U);
  stop_and_expect_exit_zero();
}

TEST_F(MetricsEndpointTest, EveryLogLineIsAJsonObject) {
  start(write_config("m_json", "log_level: debug\n"));
  wait_ready();
  // An event whose values carry quotes and a newline, to go through any line that names it.
  pg.exec("INSERT INTO m_json (aggregatetype, aggregateid, payload) VALUES ('E', 'key \"with\" quotes\n', '{}')");
  PGOUTBOX_ASSERT_EVENTUALLY(value("pgoutbox_events_published_total") == 1, 60s);
  stop_and_expect_exit_zero();
  std::istringstream in(read_file(log_path));
  simdjson::dom::parser parser;
  int count = 0;
  for (std::string line; std::getline(in, line);) {
    ++count;
    simdjson::dom::element doc;
    ASSERT_EQ(parser.parse(line).get(doc), simdjson::SUCCESS) << "not JSON: " << line;
    std::string_view timestamp, level, message;
    EXPECT_EQ(doc["timestamp"].get(timestamp), simdjson::SUCCESS) << line;
    EXPECT_EQ(doc["level"].get(level), simdjson::SUCCESS) << line;
    EXPECT_EQ(doc["message"].get(message), simdjson::SUCCESS) << line;
    EXPECT_EQ(timestamp.size(), 24U) << line;
  }
  EXPECT_GT(count, 5) << "too few lines to prove anything";
  EXPECT_NE(read_file(log_path).find(R"("message":"summary: )"), std::string::npos) << "no summary on the way out";
}

}  // namespace
}  // namespace pgoutbox::test
