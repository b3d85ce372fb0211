// The observer → metrics mapping, librdkafka statistics, readiness, the summary line and the
// HTTP endpoints, on a real prometheus-cpp registry and a real listening socket; no services.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>

#include <thread>

#include "http_get.h"
#include "pgoutbox/metrics/endpoints.h"
#include "pgoutbox/metrics/http_server.h"
#include "pgoutbox/metrics/kafka_statistics.h"
#include "pgoutbox/metrics/relay_probe.h"
#include "pgoutbox/metrics/slot_probe.h"
#include "pgoutbox/metrics/summary.h"

namespace pgoutbox::metrics {
namespace {

using namespace std::chrono_literals;
using test::sample_sum;

// The shape librdkafka 2.0 emits (as its statistics documentation describes it), trimmed: the internal queue broker, a
// bootstrap entry, a learned broker with RTT samples in microseconds.
constexpr const char* kStatistics = R"({
  "name": "rdkafka#producer-1", "client_id": "pgoutbox", "type": "producer", "ts": 5311743416, "time": 1764412885,
  "age": 5002372, "replyq": 0, "msg_cnt": 17, "msg_size": 4096, "msg_max": 100000, "msg_size_max": 1073741824,
  "tx": 12, "tx_bytes": 3000, "rx": 12, "rx_bytes": 900,
  "brokers": {
    ":0/internal": {"name": ":0/internal", "nodeid": -1, "nodename": "", "source": "internal", "state": "UP",
                    "rtt": {"min": 0, "max": 0, "avg": 0, "p99": 0}},
    "127.0.0.1:9092/bootstrap": {"name": "127.0.0.1:9092/bootstrap", "nodeid": -1, "nodename": "127.0.0.1:9092",
                                 "source": "configured", "state": "INIT",
                                 "rtt": {"min": 0, "max": 0, "avg": 0, "p99": 0}},
    "127.0.0.1:9092/1": {"name": "127.0.0.1:9092/1", "nodeid": 1, "nodename": "127.0.0.1:9092", "source": "learned",
                         "state": "UP", "rtt": {"min": 800, "max": 9000, "avg": 1500, "sum": 30000, "cnt": 20,
                                                "p50": 1200, "p95": 5000, "p99": 8991, "p99_99": 9000}}
  },
  "topics": {}
})";

std::string scrape(prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

class RelayProbeTest : public ::testing::Test {
 protected:
  prometheus::Registry registry;
  RelayProbe probe{registry};
  relay::Observer& observer = probe;
};

TEST_F(RelayProbeTest, EventsCountPerTopic) {
  observer.session_started();
  for (int i = 0; i < 3; ++i) observer.event_received({}, "orders");
  observer.event_received({}, "payments");
  observer.event_published("orders", 2ms);
  observer.event_published("orders", 40ms);
  const auto text = scrape(registry);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_received_total", "topic=\"orders\""), 3);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_received_total", "topic=\"payments\""), 1);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_received_total"), 4);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_published_total", "topic=\"orders\""), 2);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_published_total", "topic=\"payments\""), 0)
      << "every series of a topic exists from its first event on";
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_dead_lettered_total", "topic=\"payments\""), 0);
  EXPECT_EQ(probe.received_total(), 4U);
  EXPECT_EQ(probe.published_total(), 2U);
  EXPECT_EQ(sample_sum(text, "pgoutbox_sessions_started_total"), 1);
}

// Topics come from row values (SECURITY.md "Row values"): the series are bounded by the
// configuration, labelled by the table whose template a topic fits, the excess as topic="other".
TEST(RelayProbeLabels, SeriesAreBoundedByTheConfigurationNotByRowValues) {
  prometheus::Registry registry;
  TopicLabels labels;
  labels.tables.push_back({"public.orders", config::parse_topic_template("orders.${aggregatetype}")});
  labels.tables.push_back({"public.audit", config::parse_topic_template("audit")});
  labels.max_topics = 5;
  RelayProbe probe(registry, labels);
  for (int i = 0; i < 1000; ++i) probe.event_received({}, "orders.t" + std::to_string(i));
  for (int i = 0; i < 1000; ++i) probe.event_poison({}, "bad/" + std::to_string(i), relay::PoisonAction::skipped);
  probe.event_poison({}, "", relay::PoisonAction::skipped);
  probe.event_received({}, "audit");
  const auto text = scrape(registry);
  std::size_t series = 0;
  for (auto at = text.find("\npgoutbox_events_received_total{"); at != std::string::npos;
       at = text.find("\npgoutbox_events_received_total{", at + 1)) {
    ++series;
  }
  EXPECT_LE(series, 5U + 3U) << text;
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_received_total", "table=\"public.orders\""), 1000);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_received_total", "table=\"public.orders\",topic=\"other\""), 995);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_received_total", "topic=\"orders.t0\""), 1);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_skipped_total", "table=\"unknown\",topic=\"other\""), 1001);
  EXPECT_EQ(text.find("bad/"), std::string::npos) << "a refused topic never names a series";
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_received_total", "table=\"public.audit\",topic=\"other\""), 1)
      << "past the cap, a table's topics are still counted under its own table";
}

// A row refused before sending (its topic empty or invalid) is counted under the table the relay
// names, as is a topic that two tables' templates both make; the relay's table wins over the
// template the topic fits.
TEST(RelayProbeLabels, TheTableTheRelayNamesLabelsTheSeries) {
  prometheus::Registry registry;
  TopicLabels labels;
  labels.tables.push_back({"public.orders", config::parse_topic_template("shared.${aggregatetype}")});
  labels.tables.push_back({"public.refunds", config::parse_topic_template("shared.${type}")});
  RelayProbe probe(registry, labels);
  probe.event_poison("public.refunds", "", relay::PoisonAction::dead_lettered);
  probe.event_poison("public.refunds", "x/1", relay::PoisonAction::dead_lettered);
  probe.event_received("public.orders", "shared.E");
  probe.event_received("public.refunds", "shared.E");
  probe.event_received("public.refunds", "shared.E");
  probe.event_published("shared.E", 1ms);
  const auto text = scrape(registry);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_dead_lettered_total", "table=\"public.refunds\",topic=\"other\""), 2)
      << text;
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_dead_lettered_total", "table=\"unknown\"").value_or(0), 0);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_received_total", "table=\"public.orders\",topic=\"shared.E\""), 1);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_received_total", "table=\"public.refunds\",topic=\"shared.E\""), 2);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_published_total", "topic=\"shared.E\""), 1)
      << "an acknowledgement names no table: it counts for the first table the topic was seen with";
}

TEST_F(RelayProbeTest, CommitToAckFillsTheHistogramInSeconds) {
  observer.event_published("t", 500us);  // 0.0005 s: in the 1 ms bucket
  observer.event_published("t", 3ms);    // in 5 ms
  observer.event_published("t", 2s);     // in 2.5 s
  observer.event_published("t", 120s);   // beyond 60 s: only +Inf
  const auto text = scrape(registry);
  EXPECT_EQ(sample_sum(text, "pgoutbox_commit_to_ack_seconds_count"), 4);
  EXPECT_NEAR(*sample_sum(text, "pgoutbox_commit_to_ack_seconds_sum"), 122.0035, 1e-6);
  EXPECT_EQ(sample_sum(text, "pgoutbox_commit_to_ack_seconds_bucket", "le=\"0.001\""), 1);
  EXPECT_EQ(sample_sum(text, "pgoutbox_commit_to_ack_seconds_bucket", "le=\"0.005\""), 2);
  EXPECT_EQ(sample_sum(text, "pgoutbox_commit_to_ack_seconds_bucket", "le=\"2.5\""), 3);
  EXPECT_EQ(sample_sum(text, "pgoutbox_commit_to_ack_seconds_bucket", "le=\"60\""), 3);
  EXPECT_EQ(sample_sum(text, "pgoutbox_commit_to_ack_seconds_bucket", "le=\"+Inf\""), 4);
}

// Each stage from the end of the one before (docs/operating.md, Stage latency). With the server's
// send time known, commit → walsender and walsender → received; without it, commit → received.
TEST_F(RelayProbeTest, StagesSplitAtTheWalsendersWriteWhenTheServerSaysWhen) {
  relay::StageTimes times;
  times.commit_us = 1'000'000;
  times.server_sent_us = 1'003'000;  // 3 ms in the walsender
  times.received_us = 1'003'200;     // 0.2 ms to pgoutbox
  times.sent_us = 1'003'300;
  times.acked_us = 1'010'000;
  observer.transaction_stages(times, 1'010'100);
  times.server_sent_us = 0;  // a unit whose send time is not known: all of it is receive
  observer.transaction_stages(times, 1'010'100);
  const auto text = scrape(registry);
  const auto stage = [&](const char* name, const char* suffix) {
    return sample_sum(text, std::string("pgoutbox_stage_seconds") + suffix, std::string("stage=\"") + name + "\"");
  };
  EXPECT_EQ(stage("walsender", "_count"), 1);
  EXPECT_NEAR(*stage("walsender", "_sum"), 0.003, 1e-9);
  EXPECT_EQ(stage("receive", "_count"), 2);
  EXPECT_NEAR(*stage("receive", "_sum"), 0.0002 + 0.0032, 1e-9);
  EXPECT_NEAR(*stage("send", "_sum"), 2 * 0.0001, 1e-9);
  EXPECT_NEAR(*stage("ack", "_sum"), 2 * 0.0067, 1e-9);
  EXPECT_NEAR(*stage("confirm", "_sum"), 2 * 0.0001, 1e-9);
}

TEST_F(RelayProbeTest, PoisonActionsAreFailuresCountedByOutcome) {
  observer.event_poison({}, "bad", relay::PoisonAction::retried);
  observer.event_poison({}, "bad", relay::PoisonAction::retried);
  observer.event_poison({}, "bad", relay::PoisonAction::dead_lettered);
  observer.event_poison({}, "other", relay::PoisonAction::skipped);
  observer.event_poison({}, "other", relay::PoisonAction::stopped);
  const auto text = scrape(registry);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_failed_total", "topic=\"bad\""), 3);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_failed_total", "topic=\"other\""), 2);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_retried_total", "topic=\"bad\""), 2);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_dead_lettered_total", "topic=\"bad\""), 1);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_skipped_total", "topic=\"other\""), 1);
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_dead_lettered_total", "topic=\"other\""), 0);
}

// docs/spec.md I13: a record the topic's limits refuse is counted by why, besides the poison
// action that follows it; both reasons exist at 0 from a topic's first event on.
TEST_F(RelayProbeTest, RefusalsBeforeSendingAreCountedByReason) {
  observer.event_received("public.outbox", "orders");
  observer.event_refused_before_sending("public.outbox", "big", relay::RefusalReason::too_large);
  observer.event_refused_before_sending("public.outbox", "big", relay::RefusalReason::too_large);
  observer.event_refused_before_sending("public.outbox", "compacted", relay::RefusalReason::null_key_compacted);
  const auto text = scrape(registry);
  const auto refused = [&](const char* topic, const char* reason) {
    return sample_sum(text, "pgoutbox_events_refused_before_sending_total",
                      std::string("reason=\"") + reason + "\",table=\"public.outbox\",topic=\"" + topic + "\"");
  };
  EXPECT_EQ(refused("big", "too_large"), 2) << text;
  EXPECT_EQ(refused("big", "null_key_compacted"), 0);
  EXPECT_EQ(refused("compacted", "null_key_compacted"), 1);
  EXPECT_EQ(refused("compacted", "too_large"), 0);
  EXPECT_EQ(refused("orders", "too_large"), 0) << "every series of a topic exists from its first event on";
  EXPECT_EQ(sample_sum(text, "pgoutbox_events_failed_total", "topic=\"big\""), 0)
      << "the poison action is the relay's to report, once the policy has acted";
}

TEST_F(RelayProbeTest, BackfillProgressPerTableAndState) {
  observer.backfill_progress("public.outbox", 100, 40, 250);
  observer.backfill_progress("public.outbox", 200, 100, 250);
  const auto text = scrape(registry);
  EXPECT_EQ(sample_sum(text, "pgoutbox_backfill_rows", "state=\"read\""), 200);
  EXPECT_EQ(sample_sum(text, "pgoutbox_backfill_rows", "state=\"published\""), 100);
  EXPECT_EQ(sample_sum(text, "pgoutbox_backfill_rows", "state=\"total\""), 250);
  EXPECT_EQ(sample_sum(text, "pgoutbox_backfill_rows", "table=\"public.outbox\""), 550);
}

TEST_F(RelayProbeTest, GaugesFollowTheLatestValue) {
  observer.in_flight(10, 2048);
  observer.in_flight(4, 512);
  observer.received_lsn(*Lsn::parse("1/10"));
  observer.confirmed_lsn(*Lsn::parse("0/FF"));
  observer.paused(true);
  auto text = scrape(registry);
  EXPECT_EQ(sample_sum(text, "pgoutbox_in_flight_events"), 4);
  EXPECT_EQ(sample_sum(text, "pgoutbox_in_flight_bytes"), 512);
  EXPECT_EQ(sample_sum(text, "pgoutbox_received_lsn"), static_cast<double>((1ULL << 32) + 0x10));
  EXPECT_EQ(sample_sum(text, "pgoutbox_confirmed_lsn"), 255);
  EXPECT_EQ(sample_sum(text, "pgoutbox_stream_paused"), 1);
  EXPECT_EQ(probe.confirmed(), *Lsn::parse("0/FF"));
  observer.session_ended();
  text = scrape(registry);
  EXPECT_EQ(sample_sum(text, "pgoutbox_stream_paused"), 0) << "no session, nothing paused";
  EXPECT_EQ(sample_sum(text, "pgoutbox_streaming"), 0);
}

TEST_F(RelayProbeTest, KafkaStatisticsBecomeQueueAndBrokerGauges) {
  observer.session_started();
  observer.kafka_statistics(kStatistics);
  auto text = scrape(registry);
  EXPECT_EQ(sample_sum(text, "pgoutbox_kafka_queue_messages"), 17);
  EXPECT_EQ(sample_sum(text, "pgoutbox_kafka_queue_bytes"), 4096);
  EXPECT_EQ(sample_sum(text, "pgoutbox_kafka_broker_rtt_avg_seconds", "broker=\"127.0.0.1:9092/1\""), 0.0015);
  EXPECT_EQ(sample_sum(text, "pgoutbox_kafka_broker_rtt_p99_seconds", "broker=\"127.0.0.1:9092/1\""), 0.008991);
  EXPECT_FALSE(sample_sum(text, "pgoutbox_kafka_broker_rtt_avg_seconds", "internal")) << "not a broker";
  EXPECT_EQ(sample_sum(text, "pgoutbox_kafka_up"), 1);
  EXPECT_EQ(probe.kafka_state(), KafkaState::up);

  // The broker goes away: its series go, and Kafka is down.
  observer.kafka_statistics(R"({"msg_cnt": 3, "msg_size": 10, "brokers": {
      "127.0.0.1:9092/bootstrap": {"name": "127.0.0.1:9092/bootstrap", "nodeid": -1, "source": "configured",
                                   "state": "DOWN", "rtt": {"avg": 0, "p99": 0}}}})");
  text = scrape(registry);
  EXPECT_FALSE(sample_sum(text, "pgoutbox_kafka_broker_rtt_avg_seconds", "/1\""));
  EXPECT_EQ(sample_sum(text, "pgoutbox_kafka_broker_rtt_avg_seconds", "bootstrap"), 0);
  EXPECT_EQ(sample_sum(text, "pgoutbox_kafka_up"), 0);
  EXPECT_EQ(probe.kafka_state(), KafkaState::down);
}

TEST_F(RelayProbeTest, MalformedStatisticsChangeNothing) {
  observer.kafka_statistics(kStatistics);
  observer.kafka_statistics("{\"msg_cnt\": ");
  observer.kafka_statistics("[]");
  EXPECT_EQ(sample_sum(scrape(registry), "pgoutbox_kafka_queue_messages"), 17);
}

TEST(KafkaStatistics, ParsesQueueAndRealBrokers) {
  const auto stats = parse_kafka_statistics(kStatistics);
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->queue_messages, 17U);
  EXPECT_EQ(stats->queue_bytes, 4096U);
  ASSERT_EQ(stats->brokers.size(), 2U) << "the internal broker is left out";
  EXPECT_TRUE(stats->any_broker_up());
  EXPECT_FALSE(parse_kafka_statistics("not json"));
  EXPECT_FALSE(parse_kafka_statistics(R"({"brokers": {}})")) << "no msg_cnt: not statistics";
}

TEST_F(RelayProbeTest, ReadyOnlyWhileStreamingWithKafkaUp) {
  EXPECT_FALSE(readiness(probe).ready);
  EXPECT_NE(readiness(probe).reason.find("not streaming"), std::string::npos);
  observer.session_started();
  EXPECT_FALSE(readiness(probe).ready) << "Kafka not heard from yet";
  observer.kafka_up(true);
  EXPECT_TRUE(readiness(probe).ready);
  observer.kafka_up(false);
  EXPECT_FALSE(readiness(probe).ready);
  EXPECT_NE(readiness(probe).reason.find("kafka unreachable"), std::string::npos);
  observer.event_published("t", 1ms);
  EXPECT_TRUE(readiness(probe).ready) << "an acknowledgement proves Kafka reachable";
  observer.session_ended();
  EXPECT_FALSE(readiness(probe).ready);
  observer.session_started();
  EXPECT_FALSE(readiness(probe).ready) << "a new session's producer starts unknown";
}

TEST(SlotProbe, RecordsLagRetainedStatusAndUp) {
  prometheus::Registry registry;
  SlotProbe probe(registry);
  EXPECT_FALSE(probe.lag_bytes());
  SlotSample sample;
  sample.exists = true;
  sample.active = true;
  sample.wal_status = "extended";
  sample.lag_bytes = 1234;
  sample.retained_bytes = 99999;
  probe.record(sample);
  auto text = scrape(registry);
  EXPECT_EQ(sample_sum(text, "pgoutbox_postgres_up"), 1);
  EXPECT_EQ(sample_sum(text, "pgoutbox_replication_lag_bytes"), 1234);
  EXPECT_EQ(sample_sum(text, "pgoutbox_slot_retained_wal_bytes"), 99999);
  EXPECT_EQ(sample_sum(text, "pgoutbox_slot_active"), 1);
  EXPECT_EQ(sample_sum(text, "pgoutbox_slot_wal_status", "status=\"extended\""), 1);
  EXPECT_EQ(sample_sum(text, "pgoutbox_slot_wal_status"), 1) << "one status at a time";
  EXPECT_EQ(probe.lag_bytes(), 1234);

  probe.record(SlotSample{});
  text = scrape(registry);
  EXPECT_EQ(sample_sum(text, "pgoutbox_slot_wal_status", "status=\"missing\""), 1);
  EXPECT_EQ(sample_sum(text, "pgoutbox_slot_wal_status", "status=\"extended\""), 0);
  EXPECT_EQ(sample_sum(text, "pgoutbox_slot_active"), 0);

  probe.unreachable();
  EXPECT_EQ(sample_sum(scrape(registry), "pgoutbox_postgres_up"), 0);
  EXPECT_FALSE(probe.postgres_up());
}

// On a hot standby: the replay delay, and what the standby holds on its primary when that was
// read; a reading without the primary's part keeps the last one the primary gave.
TEST(SlotProbe, RecordsAStandbysReplayAndWhatItHoldsOnThePrimary) {
  prometheus::Registry registry;
  SlotProbe probe(registry);
  SlotSample sample;
  sample.exists = true;
  sample.in_recovery = true;
  sample.unreplayed_bytes = 4096;
  sample.replay_delay_seconds = 12.5;
  sample.behind_primary_bytes = 8192;
  sample.primary_xmin_age = 30;
  sample.primary_catalog_xmin_age = 40;
  probe.record(sample);
  auto text = scrape(registry);
  EXPECT_EQ(sample_sum(text, "pgoutbox_postgres_in_recovery"), 1);
  EXPECT_EQ(sample_sum(text, "pgoutbox_standby_unreplayed_bytes"), 4096);
  EXPECT_EQ(sample_sum(text, "pgoutbox_standby_replay_delay_seconds"), 12.5);
  EXPECT_EQ(sample_sum(text, "pgoutbox_standby_behind_primary_bytes"), 8192);
  EXPECT_EQ(sample_sum(text, "pgoutbox_primary_xmin_age"), 30);
  EXPECT_EQ(sample_sum(text, "pgoutbox_primary_catalog_xmin_age"), 40);

  sample.behind_primary_bytes.reset();  // the primary did not answer this time
  sample.primary_xmin_age.reset();
  sample.primary_catalog_xmin_age.reset();
  sample.replay_delay_seconds = 0;
  probe.record(sample);
  text = scrape(registry);
  EXPECT_EQ(sample_sum(text, "pgoutbox_standby_replay_delay_seconds"), 0);
  EXPECT_EQ(sample_sum(text, "pgoutbox_primary_xmin_age"), 30);

  SlotSample promoted;  // no standby any more
  promoted.exists = true;
  probe.record(promoted);
  text = scrape(registry);
  EXPECT_EQ(sample_sum(text, "pgoutbox_postgres_in_recovery"), 0);
  EXPECT_EQ(sample_sum(text, "pgoutbox_primary_xmin_age"), 0);
}

TEST(SlotProbe, MissingOnlyWhenTheServerAnsweredWithoutTheSlot) {
  prometheus::Registry registry;
  SlotProbe probe(registry);
  probe.record(SlotSample{});
  EXPECT_EQ(sample_sum(scrape(registry), "pgoutbox_slot_wal_status", "status=\"missing\""), 1);
  probe.unreachable();
  EXPECT_EQ(sample_sum(scrape(registry), "pgoutbox_slot_wal_status"), 0)
      << "unreachable is not missing, nor any status";
  SlotSample reserved;
  reserved.exists = true;
  reserved.active = true;
  reserved.wal_status = "reserved";
  reserved.lag_bytes = 0;
  reserved.retained_bytes = 0;
  probe.record(reserved);
  probe.unreachable();
  EXPECT_EQ(sample_sum(scrape(registry), "pgoutbox_slot_wal_status"), 0) << "no stale status either";
}

TEST(Summary, RatesSinceTheLastLine) {
  prometheus::Registry registry;
  RelayProbe relay(registry);
  SlotProbe slot(registry);
  const auto start = std::chrono::steady_clock::now();
  Summary summary(relay, slot);
  for (int i = 0; i < 100; ++i) relay.event_published("t", 1ms);
  relay.in_flight(7, 700);
  relay.confirmed_lsn(*Lsn::parse("0/16B3748"));
  SlotSample sample;
  sample.exists = true;
  sample.active = true;
  sample.wal_status = "reserved";
  sample.lag_bytes = 4096;
  sample.retained_bytes = 8192;
  slot.record(sample);
  const auto line = summary.next_line(start + 10s);
  EXPECT_NE(line.find("10.0 events/s published"), std::string::npos) << line;
  EXPECT_NE(line.find("in flight 7 events (700 bytes)"), std::string::npos) << line;
  EXPECT_NE(line.find("replication lag 4096 bytes"), std::string::npos) << line;
  EXPECT_NE(line.find("confirmed 0/16B3748"), std::string::npos) << line;
  const auto quiet = summary.next_line(start + 20s);
  EXPECT_NE(quiet.find("0.0 events/s published"), std::string::npos) << quiet;
}

class EndpointsTest : public ::testing::Test {
 protected:
  prometheus::Registry registry;
  RelayProbe probe{registry};
  HttpServer server{"127.0.0.1:0", endpoints(registry, probe)};
  test::HttpResult get(const std::string& target) { return test::http_get("127.0.0.1", server.port(), target); }
};

TEST_F(EndpointsTest, HealthzAnswersWhileTheProcessRuns) {
  const auto res = get("/healthz");
  EXPECT_EQ(res.status, 200U);
  EXPECT_EQ(res.body, "ok\n");
}

TEST_F(EndpointsTest, ReadyzFollowsTheSessionAndKafka) {
  auto res = get("/readyz");
  EXPECT_EQ(res.status, 503U);
  EXPECT_NE(res.body.find("not streaming"), std::string::npos) << res.body;
  EXPECT_EQ(std::count(res.body.begin(), res.body.end(), '\n'), 1) << "one line";
  probe.session_started();
  probe.kafka_up(true);
  res = get("/readyz");
  EXPECT_EQ(res.status, 200U) << res.body;
  probe.kafka_up(false);
  EXPECT_EQ(get("/readyz").status, 503U);
}

TEST_F(EndpointsTest, MetricsIsPrometheusTextOfTheRegistry) {
  probe.event_received({}, "orders");
  register_process_info(registry, "9.9.9");
  const auto res = get("/metrics");
  EXPECT_EQ(res.status, 200U);
  EXPECT_EQ(res.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(res.body.find("# TYPE pgoutbox_events_received_total counter"), std::string::npos) << res.body;
  EXPECT_EQ(sample_sum(res.body, "pgoutbox_events_received_total", "topic=\"orders\""), 1);
  EXPECT_EQ(sample_sum(res.body, "pgoutbox_build_info", "version=\"9.9.9\""), 1);
  EXPECT_GT(*sample_sum(res.body, "pgoutbox_start_time_seconds"), 1.7e9);
}

TEST_F(EndpointsTest, UnknownPathsAndMethods) {
  EXPECT_EQ(get("/").status, 404U);
  EXPECT_EQ(get("/metrics/x").status, 404U);
  EXPECT_EQ(get("/healthz?verbose=1").status, 200U);
  EXPECT_EQ(test::http_request("127.0.0.1", server.port(), "POST", "/healthz").status, 405U);
  const auto head = test::http_request("127.0.0.1", server.port(), "HEAD", "/metrics");
  EXPECT_EQ(head.status, 200U);
  EXPECT_TRUE(head.body.empty());
}

TEST(HttpServer, RefusesAnAddressInUseOrMalformed) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor taken(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  const auto port = taken.local_endpoint().port();
  try {
    HttpServer server("127.0.0.1:" + std::to_string(port), {});
    FAIL() << "listened on a port in use";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot listen"), std::string::npos) << e.what();
  }
  EXPECT_THROW(HttpServer("no-port", {}), std::runtime_error);
  EXPECT_THROW(HttpServer("127.0.0.1:notaport", {}), std::runtime_error);
}

// SECURITY.md "The metrics port": a client holding a connection open without a request is
// closed at the 5 s request deadline.
TEST(HttpServer, AnIdleClientIsClosedAtTheRequestDeadline) {
  HttpServer server("127.0.0.1:0", {{"/healthz", [] { return HttpResponse{200, "text/plain", "ok\n"}; }}});
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket idle(io);
  idle.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
  const auto started = std::chrono::steady_clock::now();
  char byte = 0;
  boost::system::error_code ec;
  idle.read_some(boost::asio::buffer(&byte, 1), ec);
  const auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(ec, boost::asio::error::eof) << ec.message();
  EXPECT_GE(waited, std::chrono::seconds(4)) << "closed before its deadline";
  EXPECT_LT(waited, std::chrono::seconds(8)) << "held past its deadline";
}

// At the cap, a new connection closes the one that has waited longest for a request: a probe is
// answered at once, not after the idle connections ahead of it time out.
TEST(HttpServer, ANewClientClosesTheOldestIdleOneAtTheCap) {
  HttpServer server("127.0.0.1:0",
                    {{"/healthz",
                      [] {
                        return HttpResponse{200, "text/plain", "ok\n"};
                      }}},
                    HttpLimits{.max_connections = 2, .reserved_descriptors = 0});
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket older(io);
  boost::asio::ip::tcp::socket newer(io);
  older.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // accepted in this order
  newer.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(test::http_get("127.0.0.1", server.port(), "/healthz", std::chrono::seconds(1)).status, 200U);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(1));
  char byte = 0;
  boost::system::error_code ec;
  older.read_some(boost::asio::buffer(&byte, 1), ec);  // closed to make room: at once
  EXPECT_EQ(ec, boost::asio::error::eof) << ec.message();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  // The newer idle connection is still open: a keep-alive client that sends its request now is served.
  const std::string request = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  boost::asio::write(newer, boost::asio::buffer(request), ec);
  ASSERT_FALSE(ec) << ec.message();
  std::string answer(64, '\0');
  const auto n = newer.read_some(boost::asio::buffer(answer), ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(answer.substr(0, std::min<std::size_t>(n, 15)), "HTTP/1.1 200 OK");
}

// A connection that would leave too few descriptors for the relay is closed at once; the server
// stays up and answers once descriptors are back.
TEST(HttpServer, ClosesConnectionsThatWouldEatTheRelaysDescriptorReserve) {
  HttpServer starved("127.0.0.1:0",
                     {{"/healthz",
                       [] {
                         return HttpResponse{200, "text/plain", "ok\n"};
                       }}},
                     HttpLimits{.max_connections = 16, .reserved_descriptors = std::uint64_t{1} << 40});
  EXPECT_EQ(test::http_get("127.0.0.1", starved.port(), "/healthz").status, 0U);
  EXPECT_EQ(test::http_get("127.0.0.1", starved.port(), "/healthz").status, 0U);
}

TEST(HttpServer, ListensOnIpv6Literals) {
  try {
    HttpServer server("[::1]:0", {{"/healthz", [] { return HttpResponse{200, "text/plain", "ok\n"}; }}});
    EXPECT_EQ(test::http_get("::1", server.port(), "/healthz").status, 200U);
  } catch (const std::runtime_error& e) {
    GTEST_SKIP() << "no IPv6 loopback here: " << e.what();
  }
}

// DNS rebinding: a page the operator's browser opens resolves a name of its own to 127.0.0.1 (or
// to the pod's private address) and reads the metrics port through it, as the same origin. The
// browser sends that name as Host, so only an IP address, localhost and the names listed
// (metrics_allowed_hosts) are answered: the kubelet's probes send the pod's IP and port, and
// Prometheus the target's address.
TEST(HttpServer, AnswersOnlyAnAddressLocalhostOrAListedNameAsHost) {
  const auto metrics = [] { return HttpResponse{200, "text/plain", "pgoutbox_up 1\n"}; };
  HttpServer server("127.0.0.1:0", {{"/metrics", metrics}}, {}, {"pgoutbox.monitoring.svc", "relay-0"});
  const auto get = [&](const std::string& host) {
    return test::http_request("127.0.0.1", server.port(), "GET", "/metrics", 10s, host);
  };
  const std::string port = std::to_string(server.port());
  for (const std::string& host :
       std::vector<std::string>{"127.0.0.1:" + port, "127.0.0.1", "10.244.1.17:8432", "[::1]:" + port, "[::1]",
                                "localhost:" + port, "LocalHost", "localhost.", "pgoutbox.monitoring.svc:8432",
                                "PGOUTBOX.Monitoring.svc.", "relay-0", std::string()}) {
    const auto res = get(host);
    EXPECT_EQ(res.status, 200U) << "Host: " << host;
    EXPECT_EQ(res.body, "pgoutbox_up 1\n") << "Host: " << host;
  }
  for (const std::string& host : std::vector<std::string>{
           "rebind.attacker.example:" + port, "rebind.attacker.example", "127.0.0.1.nip.io:" + port,
           "localhost.attacker.example", "pgoutbox.monitoring.svc.attacker.example", "relay-1", "127.0.0.1:80:80",
           "127.0.0.1:http", "[::1", "[relay-0]:8432", "0x7f.1:8432", "127.1", "relay-0:"}) {
    const auto res = get(host);
    EXPECT_EQ(res.status, 421U) << "Host: " << host;
    EXPECT_EQ(res.body.find("pgoutbox_up"), std::string::npos) << "Host: " << host;
    EXPECT_NE(res.body.find("metrics_allowed_hosts"), std::string::npos) << res.body;
  }
  EXPECT_EQ(test::http_request("127.0.0.1", server.port(), "HEAD", "/metrics", 10s, "rebind.attacker.example").status,
            421U);
}

}  // namespace
}  // namespace pgoutbox::metrics
