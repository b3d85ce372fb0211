// The relay end to end: real PostgreSQL 15 → pgoutbox → real Kafka (docs/spec.md I1–I7).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <thread>

#include "eventually.h"
#include "kafka_client.h"
#include "relay_config.h"
#include "relay_runner.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

class RelayTest : public ::testing::Test {
 protected:
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();

  // A Debezium-shaped outbox table `name` (payload type as given) and a config streaming it.
  config::Config outbox_config(const std::string& name, const std::string& payload_type = "jsonb") {
    pg.exec("CREATE TABLE " + name +
            " (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text NOT NULL, aggregateid text, "
            "type text, payload " +
            payload_type + ", created_at timestamptz DEFAULT now())");
    auto cfg = relay_config(pg.dsn(), kafka.bootstrap(), name);
    slots_.push_back(cfg.postgres.slot);
    return cfg;
  }

  void TearDown() override {
    for (const auto& slot : slots_) pg.drop_slot_when_free(slot);
  }

  std::optional<Lsn> slot_confirmed(const std::string& slot) {
    const auto v =
        pg.query_value("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '" + slot + "'");
    if (!v) return std::nullopt;
    return Lsn::parse(*v);
  }

  std::vector<std::string> slots_;
};

TEST_F(RelayTest, EveryCommittedRowArrivesOnceWithTopicKeyValueAndHeaders) {
  auto cfg = outbox_config("basic");
  create_topic(kafka.bootstrap(), "basic.Order", 3);
  RelayRunner relay(cfg);
  pg.exec(
      "INSERT INTO basic (id, aggregatetype, aggregateid, type, payload) VALUES "
      "('11111111-1111-1111-1111-111111111111', 'Order', 'order-1', 'OrderCreated', '{\"total\": 10, \"cur\": "
      "\"EUR\"}'), "
      "('22222222-2222-2222-2222-222222222222', 'Customer', 'cust-9', 'CustomerMoved', '{\"city\": \"Zürich\"}')");
  // Rolled back: must never appear (I3).
  pg.exec(
      "BEGIN; INSERT INTO basic (aggregatetype, aggregateid, type, payload) VALUES ('Order', 'order-2', 'OrderPaid', "
      "'{}');"
      "ROLLBACK");
  // Insert-then-delete in one transaction: the insert is still relayed.
  pg.exec(
      "BEGIN; INSERT INTO basic (id, aggregatetype, aggregateid, type, payload) VALUES "
      "('33333333-3333-3333-3333-333333333333', 'Customer', 'cust-10', 'CustomerCreated', '{}');"
      "DELETE FROM basic WHERE id = '33333333-3333-3333-3333-333333333333'; COMMIT");
  PGOUTBOX_ASSERT_EVENTUALLY(relay.counters().records_acked >= 3U, 30s);
  const auto orders = read_topic(kafka.bootstrap(), "basic.Order", 1, 30s);
  const auto customers = read_topic(kafka.bootstrap(), "basic.Customer", 2, 30s);
  ASSERT_EQ(orders.size(), 1U);
  ASSERT_EQ(customers.size(), 2U);
  EXPECT_EQ(customers[1].header("id"), "33333333-3333-3333-3333-333333333333");
  const auto& o = orders[0];
  EXPECT_EQ(o.key, "order-1");
  EXPECT_EQ(o.value, "{\"cur\": \"EUR\", \"total\": 10}");  // jsonb as its text
  EXPECT_EQ(o.header("id"), "11111111-1111-1111-1111-111111111111");
  EXPECT_EQ(o.header("type"), "OrderCreated");
  EXPECT_EQ(customers[0].value, "{\"city\": \"Zürich\"}");
  EXPECT_EQ(customers[0].key, "cust-9");
  EXPECT_FALSE(relay.done()) << relay.outcome().reason;
}

TEST_F(RelayTest, PayloadTypesAreRelayedAsStored) {
  struct Case {
    std::string type;
    std::string sql_value;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"json", "'{\"b\": 1,   \"a\": 2}'", "{\"b\": 1,   \"a\": 2}"},
      {"text", "'plain text ünïcode'", "plain text ünïcode"},
      {"bytea", "'\\x00ff10ab'::bytea", std::string("\x00\xff\x10\xab", 4)},
  };
  for (const auto& c : cases) {
    const std::string name = "payload_" + c.type;
    auto cfg = outbox_config(name, c.type);
    RelayRunner relay(cfg);
    pg.exec("INSERT INTO " + name + " (aggregatetype, aggregateid, payload) VALUES ('T', 'k', " + c.sql_value + ")");
    const auto got = read_topic(kafka.bootstrap(), name + ".T", 1, 30s);
    ASSERT_EQ(got.size(), 1U) << c.type;
    EXPECT_EQ(got[0].value, c.expected) << c.type;
  }
}

TEST_F(RelayTest, SeveralTablesWithTheirOwnMappingsAndCustomColumns) {
  auto cfg = outbox_config("multi_a");
  pg.exec(
      "CREATE SCHEMA IF NOT EXISTS shop; CREATE TABLE shop.\"Events\" (event_id bigint PRIMARY KEY, "
      "kind text, order_no text, body text, meta jsonb, occurred timestamptz)");
  config::TableConfig custom;
  custom.schema = "shop";
  custom.name = "Events";
  custom.columns = {"event_id", "kind", "order_no", "body", std::nullopt, std::string("meta"), std::string("occurred")};
  custom.topic = "shop-${kind}";
  cfg.tables.push_back(custom);
  cfg.provenance_headers = true;
  RelayRunner relay(cfg);
  pg.exec(
      "BEGIN; INSERT INTO multi_a (aggregatetype, aggregateid, payload) VALUES ('A', 'a1', '{}');"
      "INSERT INTO shop.\"Events\" VALUES (7, 'refund', 'R-1', 'refunded', '{\"traceparent\": \"00-t-01\", \"n\": 2}', "
      "'2026-01-02 03:04:05.678+00'); COMMIT");
  const auto a = read_topic(kafka.bootstrap(), "multi_a.A", 1, 30s);
  const auto shop = read_topic(kafka.bootstrap(), "shop-refund", 1, 30s);
  ASSERT_EQ(a.size(), 1U);
  ASSERT_EQ(shop.size(), 1U);
  EXPECT_EQ(shop[0].key, "R-1");
  EXPECT_EQ(shop[0].value, "refunded");
  EXPECT_EQ(shop[0].header("id"), "7");
  EXPECT_EQ(shop[0].header("traceparent"), "00-t-01");
  EXPECT_EQ(shop[0].header("n"), "2");
  EXPECT_FALSE(shop[0].header("type"));
  EXPECT_EQ(shop[0].timestamp_ms, 1'767'323'045'678);
  ASSERT_TRUE(shop[0].header("pgoutbox.lsn"));
  EXPECT_EQ(shop[0].header("pgoutbox.lsn"), a[0].header("pgoutbox.lsn")) << "same transaction, same commit LSN";
}

TEST_F(RelayTest, AHundredThousandRowTransactionArrivesWhole) {
  auto cfg = outbox_config("big");
  create_topic(kafka.bootstrap(), "big.Bulk", 4);
  RelayRunner relay(cfg);
  pg.exec(
      "INSERT INTO big (aggregatetype, aggregateid, type, payload) SELECT 'Bulk', 'k' || (g % 1000), 'Made', "
      "jsonb_build_object('n', g) FROM generate_series(1, 100000) g");
  const auto got = read_topic(kafka.bootstrap(), "big.Bulk", 100000, 180s);
  ASSERT_EQ(got.size(), 100000U);
  std::set<std::string> ids;
  for (const auto& r : got) ids.insert(*r.header("id"));
  EXPECT_EQ(ids.size(), 100000U);
  PGOUTBOX_EXPECT_EVENTUALLY(relay.counters().records_acked == 100000U, 30s);
}

// 8 writers, 100 keys with per-key sequence numbers: every row once, and per key in commit order.
TEST_F(RelayTest, ConcurrentWritersKeepPerKeyCommitOrder) {
  auto cfg = outbox_config("order8");
  cfg.provenance_headers = true;
  create_topic(kafka.bootstrap(), "order8.Seq", 6);
  RelayRunner relay(cfg);
  pg.exec(
      "CREATE TABLE order8_seq (k int PRIMARY KEY, n int NOT NULL); "
      "INSERT INTO order8_seq SELECT g, 0 FROM generate_series(0, 99) g");
  constexpr int kWriters = 8;
  constexpr int kTxnsEach = 60;
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      auto conn = pg.connect();
      for (int i = 0; i < kTxnsEach; ++i) {
        const int key = (w * 37 + i * 11) % 100;
        // The row lock on order8_seq orders writers of one key: sequence order = commit order.
        exec_on(conn.get(),
                "BEGIN; WITH s AS (UPDATE order8_seq SET n = n + 1 WHERE k = " + std::to_string(key) +
                    " RETURNING n) INSERT INTO order8 (aggregatetype, aggregateid, payload) SELECT 'Seq', 'key-" +
                    std::to_string(key) +
                    "', jsonb_build_object('n', n) FROM s; "
                    "INSERT INTO order8 (aggregatetype, aggregateid, payload) VALUES ('Seq', 'noise-" +
                    std::to_string(w) + "', '{}'); COMMIT");
      }
    });
  }
  for (auto& t : writers) t.join();
  const auto got = read_topic(kafka.bootstrap(), "order8.Seq", 2 * kWriters * kTxnsEach, 120s);
  ASSERT_EQ(got.size(), static_cast<std::size_t>(2 * kWriters * kTxnsEach));
  std::map<std::string, std::vector<int>> seq_by_key;
  std::map<std::string, int> partition_of;
  for (const auto& r : got) {
    if (r.key->rfind("key-", 0) != 0) continue;
    const auto n = std::stoi(r.value->substr(r.value->find(':') + 1));
    seq_by_key[*r.key].push_back(n);
    if (partition_of.count(*r.key) != 0) {
      EXPECT_EQ(partition_of[*r.key], r.partition) << "a key moved between partitions";
    }
    partition_of[*r.key] = r.partition;
  }
  int total = 0;
  for (const auto& [key, seqs] : seq_by_key) {
    // read_topic returns each partition in offset order; per key, the sequence must be 1..n.
    for (std::size_t i = 0; i < seqs.size(); ++i) ASSERT_EQ(seqs[i], static_cast<int>(i) + 1) << key;
    total += static_cast<int>(seqs.size());
  }
  EXPECT_EQ(total, kWriters * kTxnsEach);
}

// I2: with the broker frozen nothing can be acknowledged, so the slot must not be confirmed
// past any transaction written meanwhile; after SIGCONT everything arrives and it catches up.
TEST_F(RelayTest, ConfirmedFlushNeverPassesAnUnacknowledgedCommit) {
  auto cfg = outbox_config("frozen");
  cfg.provenance_headers = true;
  RelayRunner relay(cfg);
  pg.exec("INSERT INTO frozen (aggregatetype, aggregateid, payload) VALUES ('F', 'before', '{}')");
  ASSERT_EQ(read_topic(kafka.bootstrap(), "frozen.F", 1, 30s).size(), 1U);

  kafka.pause();
  Lsn max_confirmed_while_frozen;
  for (int i = 0; i < 20; ++i) {
    pg.exec("INSERT INTO frozen (aggregatetype, aggregateid, payload) VALUES ('F', 'during-" + std::to_string(i) +
            "', '{}')");
    std::this_thread::sleep_for(150ms);  // pacing the writer, not waiting for a result
    if (const auto c = slot_confirmed(cfg.postgres.slot); c && *c > max_confirmed_while_frozen)
      max_confirmed_while_frozen = *c;
  }
  kafka.resume();

  const auto got = read_topic(kafka.bootstrap(), "frozen.F", 21, 120s);
  ASSERT_EQ(got.size(), 21U);
  Lsn first_frozen_commit{~0ULL};
  for (const auto& r : got) {
    if (r.key->rfind("during-", 0) == 0)
      first_frozen_commit = std::min(first_frozen_commit, *Lsn::parse(*r.header("pgoutbox.lsn")));
  }
  EXPECT_LE(max_confirmed_while_frozen, first_frozen_commit)
      << "confirmed " << max_confirmed_while_frozen.to_string() << " past unacknowledged commit "
      << first_frozen_commit.to_string();
  Lsn last_commit;
  for (const auto& r : got) last_commit = std::max(last_commit, *Lsn::parse(*r.header("pgoutbox.lsn")));
  PGOUTBOX_EXPECT_EVENTUALLY(slot_confirmed(cfg.postgres.slot) > last_commit, 30s);
}

// I7: a quiet outbox on a busy database does not make the slot keep WAL.
TEST_F(RelayTest, AnIdleOutboxDoesNotPinWal) {
  auto cfg = outbox_config("idle");
  RelayRunner relay(cfg);
  pg.exec("INSERT INTO idle (aggregatetype, aggregateid, payload) VALUES ('I', 'k', '{}')");
  ASSERT_EQ(read_topic(kafka.bootstrap(), "idle.I", 1, 30s).size(), 1U);
  pg.exec("CREATE TABLE idle_busy (id bigserial, pad text)");
  for (int i = 0; i < 5; ++i) {
    pg.exec("INSERT INTO idle_busy (pad) SELECT repeat('x', 1000) FROM generate_series(1, 10000)");  // ~10 MB each
  }
  const auto retained = [&] {
    pg.exec("CHECKPOINT");
    return std::stoll(
        *pg.query_value("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn) FROM pg_replication_slots "
                        "WHERE slot_name = '" +
                        cfg.postgres.slot + "'"));
  };
  const auto before = retained();
  EXPECT_GT(before, 0);
  long long last = before;
  const bool drained = eventually([&] { return (last = retained()) < 1'000'000; }, 60s, 500ms);
  EXPECT_TRUE(drained) << "slot still retains " << last << " bytes of WAL (was " << before << ")";
}

TEST_F(RelayTest, StopAndStartMidStreamLosesNothingAndRepeatsOnlyWithTheSameId) {
  auto cfg = outbox_config("restart");
  create_topic(kafka.bootstrap(), "restart.R", 2);
  std::atomic<bool> writing{true};
  std::atomic<int> written{0};
  std::thread writer;
  for (int round = 0; round < 3; ++round) {
    RelayRunner relay(cfg);
    if (round == 0) {
      // Only now does the slot exist: rows written before it are not in its stream.
      writer = std::thread([&] {
        auto conn = pg.connect();
        while (writing) {
          exec_on(conn.get(),
                  "INSERT INTO restart (aggregatetype, aggregateid, payload) SELECT 'R', 'k' || g, "
                  "jsonb_build_object('g', g) FROM generate_series(1, 50) g");
          written += 50;
        }
      });
    }
    PGOUTBOX_ASSERT_EVENTUALLY(relay.counters().records_acked > 500U, 30s);
    const auto outcome = relay.stop();
    EXPECT_EQ(outcome.kind, relay::Outcome::Kind::stopped) << outcome.reason;
  }
  writing = false;
  writer.join();
  const auto end_of_writes = *Lsn::parse(*pg.query_value("SELECT pg_current_wal_lsn()"));
  RelayRunner last(cfg);
  const auto total = static_cast<std::size_t>(written.load());
  const auto expected_ids = std::stoul(*pg.query_value("SELECT count(*) FROM restart"));
  ASSERT_EQ(expected_ids, total);
  // Confirmed means acknowledged: once the slot passes the last write, Kafka holds everything
  // (repeats included, so a count of records alone would stop reading too early).
  PGOUTBOX_ASSERT_EVENTUALLY(slot_confirmed(cfg.postgres.slot) >= end_of_writes, 120s);
  auto got = read_topic(kafka.bootstrap(), "restart.R", total, 120s);
  std::map<std::string, std::string> value_by_id;
  std::size_t duplicates = 0;
  for (const auto& r : got) {
    const auto id = *r.header("id");
    const auto [it, inserted] = value_by_id.emplace(id, *r.value);
    if (!inserted) {
      ++duplicates;
      EXPECT_EQ(it->second, *r.value) << "a repeated id carries a different record";
    }
  }
  EXPECT_EQ(value_by_id.size(), total) << "lost events";
  // Graceful stops confirm everything acknowledged: repeats are rare (the server may re-send
  // the last transaction whose confirmation it had not saved).
  EXPECT_LE(duplicates, total / 10);
  RecordProperty("duplicates", static_cast<int>(duplicates));
}

// I6: with the broker frozen, in-flight records stop at the cap (the stream is paused, the rest
// stays in Postgres's WAL) and everything arrives once it is back.
TEST_F(RelayTest, InFlightRecordsStayUnderTheCapWhileKafkaIsDown) {
  auto cfg = outbox_config("capped");
  cfg.limits.max_in_flight_records = 500;
  cfg.limits.max_in_flight_bytes = 1 << 20;
  RelayRunner relay(cfg);
  // The session reads its checkpoint from Kafka before it reads the stream; frozen before that,
  // Kafka would hold it for the checkpoint read's 30 s timeout, and no record would be produced
  // within the wait below (the CI rehearsal's flake). A counter read runs on the relay's event
  // loop, which turns only once the stream is being read.
  relay.counters();
  kafka.pause();
  for (int i = 0; i < 10; ++i) {
    pg.exec(
        "INSERT INTO capped (aggregatetype, aggregateid, payload) SELECT 'C', 'k' || (g % 50), "
        "jsonb_build_object('g', g, 'pad', repeat('x', 200)) FROM generate_series(1, 1000) g");
  }
  PGOUTBOX_EXPECT_EVENTUALLY(relay.counters().pauses >= 1U, 30s);
  // Reading has stopped at the cap: produced-but-unacknowledged never exceeds it.
  for (int i = 0; i < 10; ++i) {
    const auto c = relay.counters();
    EXPECT_LE(c.records_produced - c.records_acked, 500U);
    std::this_thread::sleep_for(200ms);  // sampling over time, not waiting for a condition
  }
  EXPECT_LT(relay.counters().records_produced, 10000U) << "read the whole backlog while Kafka was down";
  kafka.resume();
  const auto got = read_topic(kafka.bootstrap(), "capped.C", 10000, 120s);
  EXPECT_EQ(got.size(), 10000U);
  EXPECT_GE(relay.counters().pauses, 1U);
}

// Batching follows the load: a caught-up stream sends at once, whatever linger.ms says (a
// minute here, which the rows would otherwise wait out).
TEST_F(RelayTest, ACaughtUpStreamSendsWithoutWaitingOutLinger) {
  auto cfg = outbox_config("caught_up");
  cfg.kafka.properties["linger.ms"] = "60000";
  create_topic(kafka.bootstrap(), "caught_up.Order", 1);
  RelayRunner relay(cfg);
  constexpr int kRows = 5;
  for (int i = 0; i < kRows; ++i) {
    pg.exec("INSERT INTO caught_up (aggregatetype, aggregateid, type, payload) VALUES ('Order', 'o-" +
            std::to_string(i) + "', 'OrderCreated', '{}')");
    std::this_thread::sleep_for(100ms);
  }
  PGOUTBOX_ASSERT_EVENTUALLY(relay.counters().records_acked >= static_cast<std::uint64_t>(kRows), 20s);
  EXPECT_EQ(read_topic(kafka.bootstrap(), "caught_up.Order", kRows, 10s).size(), static_cast<std::size_t>(kRows));
}

TEST_F(RelayTest, AMissingColumnStopsWithAnErrorNamingTableAndColumn) {
  auto cfg = outbox_config("broken");
  cfg.tables[0].columns.payload = "body";
  RelayRunner relay(cfg);
  pg.exec("INSERT INTO broken (aggregatetype, aggregateid, payload) VALUES ('B', 'k', '{}')");
  PGOUTBOX_ASSERT_EVENTUALLY(relay.done(), 30s);
  EXPECT_EQ(relay.outcome().kind, relay::Outcome::Kind::fatal);
  EXPECT_NE(relay.outcome().reason.find("public.broken"), std::string::npos) << relay.outcome().reason;
  EXPECT_NE(relay.outcome().reason.find("\"body\""), std::string::npos) << relay.outcome().reason;
  // Nothing of that transaction was confirmed: it comes again once the mapping is fixed.
  cfg.tables[0].columns.payload = "payload";
  RelayRunner fixed(cfg);
  EXPECT_EQ(read_topic(kafka.bootstrap(), "broken.B", 1, 30s).size(), 1U);
}

}  // namespace
}  // namespace pgoutbox::test
