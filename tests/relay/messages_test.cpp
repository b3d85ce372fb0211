// The table-less outbox end to end (docs/outbox-layouts.md "Outbox without a table"): real PostgreSQL →
// relay → real Kafka. pg_logical_emit_message(true, prefix, envelope) in the application's
// transaction becomes one record, in WAL order with the transaction's rows, confirmed after
// Kafka's ack; a rolled-back transaction's message never comes; a malformed envelope or a
// non-transactional message goes through the poison policy; other prefixes are ignored and do
// not hold the slot back.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "eventually.h"
#include "kafka_client.h"
#include "relay_config.h"
#include "relay_runner.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

std::string envelope(const std::string& id, const std::string& key, const std::string& extra = "") {
  return R"({"id":")" + id + R"(","aggregatetype":"E","aggregateid":")" + key +
         R"(","type":"Created","payload":{"n":")" + id + "\"}" + extra + "}";
}

class MessagesTest : public ::testing::TestWithParam<config::Delivery> {
 protected:
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();

  // A table outbox `name` (topics <name>.<aggregatetype>) and a message outbox with prefix
  // <name>.outbox routed to the same topics.
  config::Config messages_config(const std::string& base) {
    const std::string name = base + (GetParam() == config::Delivery::exactly_once ? "_eos" : "");
    name_ = name;
    prefix_ = name + ".outbox";
    pg.exec("CREATE TABLE " + name +
            " (id text PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text, type text, payload jsonb)");
    auto cfg = relay_config(pg.dsn(), kafka.bootstrap(), name);
    config::MessageConfig m;
    m.prefix = prefix_;
    m.topic = name + ".${aggregatetype}";
    cfg.messages.push_back(m);
    cfg.delivery = GetParam();
    cfg.checkpoint.topic = name + ".checkpoints";
    cfg.poison.dead_letter_topic = name + ".dlq";
    slots_.push_back(cfg.postgres.slot);
    return cfg;
  }

  std::string emit(const std::string& body, bool transactional = true, const std::string& prefix = "") {
    return "SELECT pg_logical_emit_message(" + std::string(transactional ? "true" : "false") + ", '" +
           (prefix.empty() ? prefix_ : prefix) + "', '" + body + "');";
  }

  // The insert position: past every record written so far, also a non-transactional message the
  // WAL writer has not flushed yet.
  Lsn wal_lsn() { return *Lsn::parse(*pg.query_value("SELECT pg_current_wal_insert_lsn()")); }

  std::optional<Lsn> slot_confirmed(const std::string& slot) {
    const auto v =
        pg.query_value("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '" + slot + "'");
    return v ? Lsn::parse(*v) : std::nullopt;
  }

  void TearDown() override {
    for (const auto& slot : slots_) pg.drop_slot_when_free(slot);
  }
  std::string name_;
  std::string prefix_;
  std::vector<std::string> slots_;
};

TEST_P(MessagesTest, CommittedMessagesArePublishedRolledBackOnesNeverAndOtherPrefixesDoNotHoldTheSlot) {
  auto cfg = messages_config("msg_basic");
  RelayRunner relay(cfg);
  pg.exec("BEGIN; " +
          emit(envelope("m1", "k1",
                        R"(,"headers":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})")) +
          " COMMIT;");
  pg.exec("BEGIN; " + emit(envelope("rolled-back", "k1")) + " ROLLBACK;");
  pg.exec("BEGIN; SAVEPOINT s; " + emit(envelope("rolled-back-savepoint", "k1")) + " ROLLBACK TO SAVEPOINT s; COMMIT;");
  pg.exec(emit(envelope("m2", "k2")));
  const auto records = read_topic(kafka.bootstrap(), name_ + ".E", 2, 60s);
  ASSERT_EQ(records.size(), 2U);
  std::map<std::string, ConsumedRecord> by_id;
  for (const auto& r : records) by_id[r.header("id").value_or("?")] = r;
  ASSERT_EQ(by_id.count("m1"), 1U);
  ASSERT_EQ(by_id.count("m2"), 1U);
  const auto& m1 = by_id["m1"];
  EXPECT_EQ(m1.key, "k1");
  EXPECT_EQ(m1.value, R"({"n":"m1"})");
  EXPECT_EQ(m1.header("type"), "Created");
  EXPECT_EQ(m1.header("traceparent"), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  EXPECT_EQ(by_id["m2"].key, "k2");

  // Another application's messages, alone in their transactions and outside any: ignored, and
  // the slot is confirmed past them.
  pg.exec("BEGIN; " + emit("not an envelope at all", true, name_ + ".other") + " COMMIT;");
  pg.exec(emit("nor this", false, name_ + ".other"));
  const auto after_other = wal_lsn();
  PGOUTBOX_EXPECT_EVENTUALLY(slot_confirmed(cfg.postgres.slot) >= after_other, 30s);
  EXPECT_EQ(relay.counters().messages_received, 2U);
  EXPECT_GE(relay.counters().changes_ignored, 2U);
  // Nothing more arrived: the rolled-back messages were never sent by Postgres.
  EXPECT_EQ(read_topic(kafka.bootstrap(), name_ + ".E", 2, 2s).size(), 2U);
  EXPECT_FALSE(relay.done()) << relay.outcome().reason;
}

TEST_P(MessagesTest, RowsAndMessagesOfOneTransactionKeepTheirOrderPerKey) {
  auto cfg = messages_config("msg_order");
  create_topic(kafka.bootstrap(), name_ + ".E", 3);
  RelayRunner relay(cfg);
  std::string sql = "BEGIN;";
  std::vector<std::string> expected;
  for (int i = 0; i < 20; ++i) {
    const std::string key = "k" + std::to_string(i % 2);
    const std::string row = "r" + std::to_string(i);
    const std::string msg = "m" + std::to_string(i);
    sql += " INSERT INTO " + name_ + " VALUES ('" + row + "', 'E', '" + key + "', 'T', '{}');";
    sql += " " + emit(envelope(msg, key));
    if (key == "k0") {
      expected.push_back(row);
      expected.push_back(msg);
    }
  }
  pg.exec(sql + " COMMIT;");
  auto records = read_topic(kafka.bootstrap(), name_ + ".E", 40, 60s);
  ASSERT_EQ(records.size(), 40U);
  std::vector<ConsumedRecord> k0;
  for (const auto& r : records)
    if (r.key == "k0") k0.push_back(r);
  std::sort(k0.begin(), k0.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  std::vector<std::string> got;
  for (const auto& r : k0) got.push_back(r.header("id").value_or("?"));
  EXPECT_EQ(got, expected);
}

TEST_P(MessagesTest, MalformedAndNonTransactionalMessagesGoThroughThePoisonPolicy) {
  auto cfg = messages_config("msg_poison");
  cfg.poison.policy = config::PoisonPolicy::dead_letter;
  RelayRunner relay(cfg);
  pg.exec("BEGIN; " + emit("{\"id\": ") + " " + emit(R"({"aggregatetype":"E","aggregateid":"k","payload":{}})") + " " +
          emit(envelope("good1", "k")) + " COMMIT;");
  pg.exec(emit(envelope("nontx", "k"), false));
  pg.exec(emit(envelope("good2", "k")));
  const auto last = wal_lsn();
  const auto good = read_topic(kafka.bootstrap(), name_ + ".E", 2, 60s);
  ASSERT_EQ(good.size(), 2U);
  const auto dead = read_topic(kafka.bootstrap(), name_ + ".dlq", 3, 60s);
  ASSERT_EQ(dead.size(), 3U);
  std::multiset<std::string> codes;
  for (const auto& r : dead) codes.insert(r.header("pgoutbox.dlq.error.code").value_or("?"));
  EXPECT_EQ(codes, (std::multiset<std::string>{"INVALID_ENVELOPE", "NULL_ID", "NON_TRANSACTIONAL"}));
  for (const auto& r : dead) {
    if (r.header("pgoutbox.dlq.error.code") == "INVALID_ENVELOPE") {
      EXPECT_EQ(r.value, "{\"id\": ");
    }
    if (r.header("pgoutbox.dlq.error.code") == "NON_TRANSACTIONAL") {
      EXPECT_EQ(r.header("id"), "nontx");
      EXPECT_EQ(r.header("pgoutbox.dlq.topic"), name_ + ".E");
    }
  }
  PGOUTBOX_EXPECT_EVENTUALLY(slot_confirmed(cfg.postgres.slot) >= last, 30s);
  EXPECT_EQ(relay.counters().messages_non_transactional, 1U);
  EXPECT_FALSE(relay.done()) << relay.outcome().reason;
}

TEST_P(MessagesTest, StopPolicyEndsBeforeConfirmingAPoisonMessage) {
  auto cfg = messages_config("msg_stop");
  cfg.poison.policy = config::PoisonPolicy::stop;
  Lsn before_poison;
  {
    RelayRunner relay(cfg);
    pg.exec(emit(envelope("first", "k")));
    EXPECT_EQ(read_topic(kafka.bootstrap(), name_ + ".E", 1, 60s).size(), 1U);
    before_poison = wal_lsn();
    PGOUTBOX_ASSERT_EVENTUALLY(slot_confirmed(cfg.postgres.slot) >= before_poison, 30s);
    pg.exec(emit(R"({"aggregatetype":"E","payload":{}})"));
    PGOUTBOX_ASSERT_EVENTUALLY(relay.done(), 60s);
    EXPECT_EQ(relay.outcome().cause, relay::Fatal::poison) << relay.outcome().reason;
    EXPECT_NE(relay.outcome().reason.find("NULL_ID"), std::string::npos) << relay.outcome().reason;
  }
  // The poison message's transaction was not confirmed: it comes again.
  const auto confirmed = slot_confirmed(cfg.postgres.slot);
  ASSERT_TRUE(confirmed);
  EXPECT_LT(*confirmed, wal_lsn());
  cfg.poison.policy = config::PoisonPolicy::dead_letter;
  RelayRunner resumed(cfg);
  const auto dead = read_topic(kafka.bootstrap(), name_ + ".dlq", 1, 60s);
  ASSERT_EQ(dead.size(), 1U);
  EXPECT_EQ(dead[0].header("pgoutbox.dlq.error.code"), "NULL_ID");
}

INSTANTIATE_TEST_SUITE_P(Delivery, MessagesTest,
                         ::testing::Values(config::Delivery::at_least_once, config::Delivery::exactly_once),
                         [](const auto& param_info) {
                           return param_info.param == config::Delivery::exactly_once ? "ExactlyOnce" : "AtLeastOnce";
                         });

}  // namespace
}  // namespace pgoutbox::test
