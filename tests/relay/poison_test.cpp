// Poison records end to end (docs/spec.md I8, I13): real PostgreSQL 15 → relay → real Kafka. A
// record over its topic's max.message.bytes, or a payload that fails validation, is handled by
// the policy before it is sent; good records keep flowing, and nothing is confirmed past a
// poison record until it is handled.
#include <gtest/gtest.h>

#include <iostream>

#include "eventually.h"
#include "kafka_client.h"
#include "relay_config.h"
#include "relay_runner.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

class PoisonTest : public ::testing::Test {
 protected:
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();

  // A text-payload outbox table whose topic accepts records up to 4 KiB, and a config with
  // JSON validation on and the given policy.
  config::Config poison_config(const std::string& name, config::PoisonPolicy policy) {
    pg.exec("CREATE TABLE " + name +
            " (id text PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text, payload text)");
    create_topic(kafka.bootstrap(), name + ".E", 1, {{"max.message.bytes", "4096"}});
    auto cfg = relay_config(pg.dsn(), kafka.bootstrap(), name);
    cfg.tables.front().validate_json = true;
    cfg.poison.policy = policy;
    cfg.poison.dead_letter_topic = name + ".dlq";
    cfg.poison.max_retries = 2;
    cfg.poison.retry_backoff = 100ms;
    slots_.push_back(cfg.postgres.slot);
    return cfg;
  }

  // Ten good rows with ids g1..g10 around an oversized one (big) and a malformed one (bad).
  // Returns a WAL position inside the last transaction: confirming past it confirms them all.
  Lsn write_mixed(const std::string& name) {
    pg.exec("INSERT INTO " + name +
            " SELECT 'g' || g, 'E', 'k' || (g % 3), '{\"n\": ' || g || '}' "
            "FROM generate_series(1, 5) g");
    // Random hex, so compression cannot bring it under the topic's limit.
    pg.exec("INSERT INTO " + name +
            " SELECT 'big', 'E', 'k1', '{\"pad\": \"' || string_agg(md5(random()::text), '') || "
            "'\"}' FROM generate_series(1, 625)");
    pg.exec("INSERT INTO " + name + " VALUES ('bad', 'E', 'k2', '{\"oops\": ')");
    return *Lsn::parse(*pg.query_value("WITH rows AS (INSERT INTO " + name +
                                       " SELECT 'g' || g, 'E', 'k' || (g % 3), '{\"n\": ' || g || '}' "
                                       "FROM generate_series(6, 10) g RETURNING 1) "
                                       "SELECT pg_current_wal_insert_lsn() FROM rows LIMIT 1"));
  }

  std::optional<Lsn> slot_confirmed(const std::string& slot) {
    const auto v =
        pg.query_value("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '" + slot + "'");
    return v ? Lsn::parse(*v) : std::nullopt;
  }

  void TearDown() override {
    for (const auto& slot : slots_) pg.drop_slot_when_free(slot);
  }
  std::vector<std::string> slots_;
};

TEST_F(PoisonTest, DeadLetterTakesBothPoisonRecordsWithTheirCauseAndEveryGoodRecordArrives) {
  auto cfg = poison_config("dlq_mixed", config::PoisonPolicy::dead_letter);
  RelayRunner relay(cfg);
  const auto last = write_mixed("dlq_mixed");
  const auto good = read_topic(kafka.bootstrap(), "dlq_mixed.E", 10, 60s);
  EXPECT_EQ(good.size(), 10U);
  const auto dead = read_topic(kafka.bootstrap(), "dlq_mixed.dlq", 2, 60s);
  ASSERT_EQ(dead.size(), 2U);
  std::map<std::string, ConsumedRecord> by_id;
  for (const auto& r : dead) by_id[r.header("id").value_or("?")] = r;
  ASSERT_EQ(by_id.count("big"), 1U);
  ASSERT_EQ(by_id.count("bad"), 1U);

  const auto& big = by_id["big"];
  EXPECT_EQ(big.key, "k1");
  // Refused for its size, so dead-lettered without its value (a copy would be refused too).
  EXPECT_EQ(big.value.value_or("?"), "");
  EXPECT_EQ(big.header("pgoutbox.dlq.value.size"), std::to_string(20000U + 11U));
  EXPECT_EQ(big.header("pgoutbox.dlq.value.sha256").value_or("").size(), 64U);
  EXPECT_EQ(big.header("pgoutbox.dlq.error.code"), "MSG_SIZE_TOO_LARGE");
  EXPECT_EQ(big.header("pgoutbox.dlq.topic"), "dlq_mixed.E");
  // Its size is over the topic's max.message.bytes, read before the first row (docs/spec.md
  // I13): the policy applies before it is sent, without retries that could not succeed.
  EXPECT_EQ(big.header("pgoutbox.dlq.attempts"), "0");
  EXPECT_TRUE(Lsn::parse(big.header("pgoutbox.dlq.lsn").value_or("")));

  const auto& bad = by_id["bad"];
  EXPECT_EQ(bad.value, "{\"oops\": ");
  EXPECT_EQ(bad.header("pgoutbox.dlq.error.code"), "INVALID_JSON");
  EXPECT_EQ(bad.header("pgoutbox.dlq.attempts"), "0");  // validation failures are not sent at all

  PGOUTBOX_EXPECT_EVENTUALLY(relay.counters().dead_lettered == 2U, 30s);
  EXPECT_EQ(relay.counters().poison_retried, 0U);
  EXPECT_EQ(relay.counters().refused_before_sending, 1U);
  // Everything is handled, so the slot moves past all of it.
  PGOUTBOX_EXPECT_EVENTUALLY(slot_confirmed(cfg.postgres.slot) > last, 30s);
  EXPECT_FALSE(relay.done()) << relay.outcome().reason;
}

TEST_F(PoisonTest, StopExitsWithThePoisonCauseWithoutConfirmingAndDeadLetterResumesWithNothingLost) {
  auto cfg = poison_config("stop_mixed", config::PoisonPolicy::stop);
  const auto before = Lsn::parse(*pg.query_value("SELECT pg_current_wal_lsn()"));
  Lsn last;
  {
    RelayRunner relay(cfg);
    last = write_mixed("stop_mixed");
    PGOUTBOX_ASSERT_EVENTUALLY(relay.done(), 60s);
    EXPECT_EQ(relay.outcome().kind, relay::Outcome::Kind::fatal);
    EXPECT_EQ(relay.outcome().cause, relay::Fatal::poison);
    // The oversized one is met first and names itself: it is refused before it is sent.
    const auto& reason = relay.outcome().reason;
    EXPECT_NE(reason.find("event id big"), std::string::npos) << reason;
  }
  // Not confirmed past the first good transaction: the poison transaction comes again.
  const auto insert_big_end = slot_confirmed(cfg.postgres.slot);
  ASSERT_TRUE(insert_big_end);
  EXPECT_LT(*insert_big_end, last);
  EXPECT_GE(*insert_big_end, *before);

  cfg.poison.policy = config::PoisonPolicy::dead_letter;
  RelayRunner resumed(cfg);
  std::set<std::string> ids;
  for (const auto& r : read_topic(kafka.bootstrap(), "stop_mixed.E", 10, 60s)) ids.insert(r.header("id").value_or("?"));
  EXPECT_EQ(ids.size(), 10U);
  EXPECT_EQ(read_topic(kafka.bootstrap(), "stop_mixed.dlq", 2, 60s).size(), 2U);
  PGOUTBOX_EXPECT_EVENTUALLY(slot_confirmed(cfg.postgres.slot) > last, 30s);
}

// The dead-letter topic exists before the first poison record needs it (issue 38 item 3): created
// at the session's start, as the checkpoint topic is, so that a cluster without auto-creation, or
// one whose creation of it would fail, says so at the start and not at the first poison record.
TEST_F(PoisonTest, TheDeadLetterTopicIsCreatedAtTheStart) {
  auto cfg = poison_config("dlq_created", config::PoisonPolicy::dead_letter);
  ASSERT_EQ(topic_partitions(kafka.bootstrap(), "dlq_created.dlq"), 0);
  RelayRunner relay(cfg);
  ASSERT_FALSE(relay.done()) << relay.outcome().reason;
  EXPECT_GE(topic_partitions(kafka.bootstrap(), "dlq_created.dlq"), 1);
}

// A topic Kafka takes for the dead-letter topic's twin ('.' and '_' as one) keeps it from ever
// being created: every dead-letter write would fail and stop the relay (exit 4) at the first poison
// record, after it had confirmed what came before. It stops at the start instead, naming the twin.
TEST_F(PoisonTest, ADeadLetterTopicsTwinStopsTheRelayAtTheStartNamingIt) {
  auto cfg = poison_config("dlq_twin", config::PoisonPolicy::dead_letter);
  create_topic(kafka.bootstrap(), "dlq_twin_dlq", 1);
  RelayRunner relay(cfg);
  PGOUTBOX_ASSERT_EVENTUALLY(relay.done(), 60s);
  EXPECT_EQ(relay.outcome().kind, relay::Outcome::Kind::fatal);
  EXPECT_EQ(relay.outcome().cause, relay::Fatal::poison);
  const auto& reason = relay.outcome().reason;
  EXPECT_NE(reason.find("dead-letter topic dlq_twin.dlq"), std::string::npos) << reason;
  EXPECT_NE(reason.find("dlq_twin_dlq"), std::string::npos) << reason;
  std::cout << reason << "\n";
}

TEST_F(PoisonTest, SkipDropsPoisonOnlyWhenChosenAndConfirmsPastIt) {
  auto cfg = poison_config("skip_mixed", config::PoisonPolicy::skip);
  RelayRunner relay(cfg);
  const auto last = write_mixed("skip_mixed");
  EXPECT_EQ(read_topic(kafka.bootstrap(), "skip_mixed.E", 10, 60s).size(), 10U);
  PGOUTBOX_EXPECT_EVENTUALLY(relay.counters().skipped == 2U, 30s);
  PGOUTBOX_EXPECT_EVENTUALLY(slot_confirmed(cfg.postgres.slot) > last, 30s);
  EXPECT_EQ(topic_record_count(kafka.bootstrap(), "skip_mixed.dlq"), 0);
}

}  // namespace
}  // namespace pgoutbox::test
