// docs/spec.md I4 and I13 against a real Kafka 4.4 and Postgres 15: an operator lowers a topic's
// max.message.bytes while pgoutbox streams into it, below the batches pgoutbox already sends.
// pgoutbox read the topic's limit when it started, so Kafka refuses the next batches whole: a
// refusal pgoutbox could not foresee. Every row must still arrive, each key's first deliveries in
// commit order (at-least-once's producer stops at the refused batch and the next session sends
// its records alone in their places; exactly-once aborts and publishes again), with no duplicate
// for a read_committed consumer in exactly-once, and the slot confirmed to the end.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "event_audit.h"
#include "eventually.h"
#include "kafka_client.h"
#include "relay_config.h"
#include "relay_runner.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

class BatchRefusalTest : public ::testing::TestWithParam<config::Delivery> {
 protected:
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();

  void TearDown() override {
    for (const auto& slot : slots_) pg.drop_slot_when_free(slot);
  }

  // One transaction of `rows` rows of about 400 incompressible bytes, keys k0..k9 in turn.
  void write(const std::string& table, int rows) {
    pg.exec(
        fmt::format("INSERT INTO {} SELECT 'e' || lpad((n)::text, 8, '0'), 'E', 'k' || (n % 10), "
                    "'{{\"pad\": \"' || (SELECT string_agg(md5(random()::text || n || g), '') "
                    "FROM generate_series(1, 12) g) || '\"}}' FROM generate_series({}, {}) n",
                    table, next_, next_ + rows - 1));
    for (int n = next_; n < next_ + rows; ++n) {
      const auto key = fmt::format("k{}", n % 10);
      committed_.push_back({fmt::format("e{:08d}", n), table + ".E", key, ++seq_[key], 0, false});
    }
    next_ += rows;
  }

  std::optional<Lsn> slot_confirmed(const std::string& slot) {
    const auto v =
        pg.query_value("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '" + slot + "'");
    return v ? Lsn::parse(*v) : std::nullopt;
  }

  std::vector<std::string> slots_;
  std::vector<CommittedEvent> committed_;
  std::map<std::string, std::int64_t> seq_;
  int next_ = 1;
};

TEST_P(BatchRefusalTest, ALimitLoweredWhilePgoutboxStreamsLosesAndReordersNothing) {
  const bool exactly_once = GetParam() == config::Delivery::exactly_once;
  const std::string table = exactly_once ? "lowered_eos" : "lowered_alo";
  pg.exec("CREATE TABLE " + table +
          " (id text PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text, "
          "payload text)");
  create_topic(kafka.bootstrap(), table + ".E", 3);
  auto cfg = relay_config(pg.dsn(), kafka.bootstrap(), table);
  cfg.delivery = GetParam();
  cfg.poison.policy = config::PoisonPolicy::dead_letter;
  cfg.poison.dead_letter_topic = table + ".dlq";
  cfg.poison.retry_backoff = 50ms;
  cfg.kafka.properties["linger.ms"] = "20";  // batches of many records
  slots_.push_back(cfg.postgres.slot);
  RelayRunner relay(cfg);

  for (int t = 0; t < 10; ++t) write(table, 100);
  const auto before = read_until_complete(kafka.bootstrap(), {table + ".E"}, committed_, 60s);
  ASSERT_TRUE(audit_events(committed_, before).clean()) << audit_events(committed_, before).summary();

  // Below the batches pgoutbox sends (it read the topic's limit, 1 MB, at its start).
  alter_topic_config(kafka.bootstrap(), table + ".E", {{"max.message.bytes", "16384"}});
  for (int t = 0; t < 30; ++t) write(table, 100);
  const auto last = Lsn::parse(*pg.query_value("SELECT pg_current_wal_lsn()"));

  const auto report =
      audit_events(committed_, read_until_complete(kafka.bootstrap(), {table + ".E"}, committed_, 120s));
  EXPECT_TRUE(report.clean()) << report.summary();
  EXPECT_EQ(report.delivered, committed_.size()) << report.summary();
  EXPECT_EQ(report.order_violations, 0U) << report.summary();
  if (exactly_once) {
    EXPECT_EQ(report.duplicates, 0U) << report.summary();
  }
  PGOUTBOX_EXPECT_EVENTUALLY(slot_confirmed(cfg.postgres.slot) >= last, 60s);
  EXPECT_FALSE(relay.done()) << relay.outcome().reason;
  EXPECT_EQ(relay.counters().dead_lettered, 0U) << "every record fits the lowered limit alone";
}

INSTANTIATE_TEST_SUITE_P(BothModes, BatchRefusalTest,
                         ::testing::Values(config::Delivery::at_least_once, config::Delivery::exactly_once),
                         [](const auto& mode) {
                           return mode.param == config::Delivery::exactly_once ? "ExactlyOnce" : "AtLeastOnce";
                         });

}  // namespace
}  // namespace pgoutbox::test
