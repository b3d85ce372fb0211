// Hostile row values (issue 19 items 2, 3 and 4; SECURITY.md "Row values"), against the real
// pgoutbox binary, Postgres and Kafka:
//   - a burst of rows whose routing value makes an invalid topic is poison INVALID_TOPIC,
//     dead-lettered without a broker round trip, while another tenant's events keep flowing,
//     the session is never dropped, RSS stays bounded and /metrics does not grow per topic;
//   - the headers column cannot spoof `id`, `type` or `pgoutbox.*`, and a row with 100,000
//     header keys is poison (it never reaches consumers, which could not read its headers).
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "eventually.h"
#include "fault_fixture.h"
#include "http_get.h"
#include "kafka_client.h"
#include "process_memory.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

class HostileRowsTest : public FaultTest {
 protected:
  KafkaBroker& kafka = shared_kafka();
  int port = free_loopback_port();

  // One slot, one publication, the given tables (each "name: topic template" plus extra
  // per-table YAML), dead-letter policy, metrics on.
  std::string write_yaml(const std::string& name, const std::vector<std::pair<std::string, std::string>>& tables,
                         const std::string& dlq) {
    auto config = pipeline_config(pg.dsn(), kafka.bootstrap(), name);
    config.kafka_properties = {{"linger.ms", "5"}};
    config.tables.clear();
    for (const auto& [table, extra] : tables) {
      config.tables.push_back({.table = "public." + table, .topic = "", .validate_json = false, .extra_yaml = extra});
    }
    config.metrics_address = "127.0.0.1:" + std::to_string(port);
    config.log_format = "json";
    config.extra_yaml = "poison:\n  policy: dead-letter\n  dead_letter_topic: " + dlq +
                        "\n  max_retries: 1\n  retry_backoff: 100ms\nmetrics_topic_labels: 20\n";
    return write_pgoutbox_config(dir.path() + "/" + name + ".yaml", config);
  }
  std::string scrape() { return http_get("127.0.0.1", port, "/metrics").body; }
  double metric(const std::string& name, const std::string& labels = "") {
    return sample_sum(scrape(), name, labels).value_or(-1);
  }
};

std::size_t count_lines_starting(const std::string& text, const std::string& prefix) {
  std::size_t n = 0;
  for (std::size_t at = 0; at < text.size();) {
    const auto end = text.find('\n', at);
    if (text.compare(at, prefix.size(), prefix) == 0) ++n;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return n;
}

TEST_F(HostileRowsTest, InvalidTopicBurstIsPoisonAndOtherTenantsKeepFlowing) {
  constexpr int kHostileRows = 20'000;
  constexpr int kTenantRows = 500;
  create_outbox_table(pg.dsn(), "sec_burst_hostile");
  create_outbox_table(pg.dsn(), "sec_burst_tenant");
  create_topic(kafka.bootstrap(), "sec_burst.tenant.E", 1);
  create_topic(kafka.bootstrap(), "sec_burst.dlq", 1);
  const auto config = write_yaml("sec_burst",
                                 {{"sec_burst_hostile", "    topic: \"sec_burst.x.${aggregatetype}\"\n"},
                                  {"sec_burst_tenant", "    topic: \"sec_burst.tenant.${aggregatetype}\"\n"}},
                                 "sec_burst.dlq");
  auto relay = start_pgoutbox(config);
  ASSERT_TRUE(
      eventually([&] { return !relay->running() || slot_active_pid(pg.dsn(), "sec_burst_slot").has_value(); }, 60s) &&
      relay->running())
      << log_tail();
  PGOUTBOX_ASSERT_EVENTUALLY(metric("pgoutbox_streaming") == 1, 30s);
  RssSampler rss;
  rss.follow(relay->pid());
  rss.mark();

  // The hostile tenant's burst: 'x/1', 'x/2', ... (a '/' is not a topic character), in batches,
  // interleaved with the other tenant's rows.
  const auto started = std::chrono::steady_clock::now();
  for (int batch = 0; batch < 10; ++batch) {
    const int from = batch * (kHostileRows / 10) + 1;
    const int to = from + kHostileRows / 10 - 1;
    pg.exec(
        "INSERT INTO sec_burst_hostile (id, aggregatetype, aggregateid, type, payload) SELECT 'h' || g, 'x/' || g, "
        "'k' || g, 'Created', '{}' FROM generate_series(" +
        std::to_string(from) + ", " + std::to_string(to) + ") g");
    pg.exec(
        "INSERT INTO sec_burst_tenant (id, aggregatetype, aggregateid, type, payload) SELECT 't' || g, 'E', 'k' || g, "
        "'Created', '{}' FROM generate_series(" +
        std::to_string(batch * kTenantRows / 10 + 1) + ", " + std::to_string((batch + 1) * kTenantRows / 10) + ") g");
  }
  const auto end_of_burst = current_wal_lsn();

  // The other tenant's events arrive, and the position is confirmed past the whole burst.
  const auto tenant = read_topic(kafka.bootstrap(), "sec_burst.tenant.E", kTenantRows, 120s);
  const auto tenant_done = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(tenant.size(), static_cast<std::size_t>(kTenantRows)) << log_tail();
  const bool confirmed = eventually(
      [&] {
        const auto text = slot_confirmed_lsn(pg.dsn(), "sec_burst_slot");
        return text && Lsn::parse(*text).value_or(Lsn{}) >= end_of_burst;
      },
      180s, 200ms);
  EXPECT_TRUE(confirmed) << "the slot was never confirmed past the burst\n" << log_tail();
  const auto confirm_done = std::chrono::steady_clock::now() - started;

  // Every hostile row is in the dead-letter topic as INVALID_TOPIC; none reached a topic of its own.
  const auto dead = read_topic(kafka.bootstrap(), "sec_burst.dlq", kHostileRows, 120s);
  EXPECT_EQ(dead.size(), static_cast<std::size_t>(kHostileRows));
  if (!dead.empty()) {
    EXPECT_EQ(dead.front().header("pgoutbox.dlq.error.code"), "INVALID_TOPIC");
    EXPECT_EQ(dead.front().header("pgoutbox.dlq.attempts"), "0") << "refused locally, never sent to a broker";
    EXPECT_EQ(dead.front().header("pgoutbox.dlq.table"), "public.sec_burst_hostile") << "the topic cannot say it";
  }

  // One session all along (keepalives answered, never dropped), bounded memory and /metrics.
  const auto text = scrape();
  EXPECT_EQ(sample_sum(text, "pgoutbox_sessions_started_total"), 1) << log_tail();
  const auto series = count_lines_starting(text, "pgoutbox_events_failed_total{");
  EXPECT_LE(series, 25U) << "series per topic grow with row values";
  EXPECT_LT(text.size(), 64U * 1024U);
  // Counted under the configured table, though no topic names it (SECURITY.md "Metrics").
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_dead_lettered_total", "table=\"public.sec_burst_hostile\""),
            kHostileRows);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_dead_lettered_total", "table=\"unknown\"").value_or(0), 0);
  const auto peak = rss.window_peak();
  if (!kSanitized) {
    EXPECT_LT(peak, 150ULL << 20) << "RSS grew with the burst";
  }
  EXPECT_TRUE(relay->running());
  Figures("invalid_topic_burst")
      .add("hostile_rows", kHostileRows)
      .add("tenant_rows", static_cast<double>(tenant.size()))
      .add_ms("tenant_delivered_after", tenant_done)
      .add_ms("confirmed_after", confirm_done)
      .add("dead_lettered", static_cast<double>(dead.size()))
      .add("failed_series", static_cast<double>(series))
      .add("metrics_bytes", static_cast<double>(text.size()))
      .add_mib("rss_peak", peak);
}

TEST_F(HostileRowsTest, HeadersColumnCannotSpoofReservedHeadersAndIsCapped) {
  pg.exec(
      "CREATE TABLE sec_hdr_outbox (id text PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, "
      "type text NOT NULL, payload jsonb, headers jsonb)");
  create_topic(kafka.bootstrap(), "sec_hdr.E", 1);
  create_topic(kafka.bootstrap(), "dlq-sec_hdr", 1);
  const auto config = write_yaml(
      "sec_hdr",
      {{"sec_hdr_outbox", "    topic: \"sec_hdr.${aggregatetype}\"\n    columns:\n      headers: headers\n"}},
      "dlq-sec_hdr");
  auto relay = start_pgoutbox(config);
  ASSERT_TRUE(
      eventually([&] { return !relay->running() || slot_active_pid(pg.dsn(), "sec_hdr_slot").has_value(); }, 60s) &&
      relay->running())
      << log_tail();

  pg.exec(R"(INSERT INTO sec_hdr_outbox VALUES ('real-1', 'E', 'k1', 'OrderCreated', '{}',
             '{"id": "SPOOFED", "type": "Refund", "pgoutbox.lsn": "0/0", "Pgoutbox.Xid": "1", "traceparent": "00-abc-def-01"}'))");
  // 100,000 header keys: librdkafka's consumer refuses more than 100,000 headers (the record
  // then reads back with none); pgoutbox's cap makes the row poison long before.
  pg.exec(
      "INSERT INTO sec_hdr_outbox SELECT 'many-1', 'E', 'k2', 'OrderCreated', '{}', "
      "jsonb_object_agg('h' || g, 'v') FROM generate_series(1, 100000) g");
  pg.exec(
      "INSERT INTO sec_hdr_outbox VALUES ('real-2', 'E', 'k3', 'OrderCreated', '{}', '{\"traceparent\": \"00-x\"}')");

  const auto records = read_topic(kafka.bootstrap(), "sec_hdr.E", 2, 60s);
  ASSERT_EQ(records.size(), 2U) << log_tail();
  const auto& spoof = records[0];
  std::size_t ids = 0, types = 0, provenance = 0;
  for (const auto& [name, value] : spoof.headers) {
    if (name == "id") ++ids;
    if (name == "type") ++types;
    if (name.rfind("pgoutbox.", 0) == 0 || name.rfind("Pgoutbox.", 0) == 0) ++provenance;
  }
  EXPECT_EQ(ids, 1U);
  EXPECT_EQ(spoof.header("id"), "real-1");
  EXPECT_EQ(types, 1U);
  EXPECT_EQ(spoof.header("type"), "OrderCreated");
  EXPECT_EQ(provenance, 0U);
  EXPECT_EQ(spoof.header("traceparent"), "00-abc-def-01") << "other headers pass";
  EXPECT_EQ(records[1].header("id"), "real-2");

  const auto dead = read_topic(kafka.bootstrap(), "dlq-sec_hdr", 1, 60s);
  ASSERT_EQ(dead.size(), 1U) << log_tail();
  EXPECT_EQ(dead[0].header("id"), "many-1");
  EXPECT_EQ(dead[0].header("pgoutbox.dlq.error.code"), "TOO_MANY_HEADERS");
  EXPECT_LT(dead[0].headers.size(), 20U) << "the dead-letter copy does not carry the excess";

  PGOUTBOX_EXPECT_EVENTUALLY(metric("pgoutbox_headers_dropped_total", "table=\"public.sec_hdr_outbox\"") == 4, 30s);
  const auto log = log_tail();
  std::size_t warnings = 0;
  for (auto at = log.find("reserved header"); at != std::string::npos; at = log.find("reserved header", at + 1))
    ++warnings;
  EXPECT_EQ(warnings, 1U) << "logged once per table";
  Figures("header_spoofing")
      .add("id_headers", static_cast<double>(ids))
      .add("dead_lettered", static_cast<double>(dead.size()));
}

}  // namespace
}  // namespace pgoutbox::test
