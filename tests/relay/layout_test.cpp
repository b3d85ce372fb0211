// Outbox layouts and server settings that real databases have (issue 12, SPEC I9): every row of a
// configured outbox table reaches Kafka whatever partition, child or setting it comes through,
// or the relay stops before confirming it. Real PostgreSQL 15 and real Kafka.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>

#include "eventually.h"
#include "kafka_client.h"
#include "relay_config.h"
#include "relay_runner.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kColumns =
    "id text NOT NULL, aggregatetype text NOT NULL, aggregateid text, type text, payload jsonb, "
    "created_at timestamptz DEFAULT now()";

class LayoutTest : public ::testing::Test {
 protected:
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();

  // A relay for outbox table `name` through publication `pub` (created by the test).
  config::Config relay_config(const std::string& name, const std::string& pub, const std::string& dbname = "postgres") {
    auto cfg = test::relay_config(pg.dsn(dbname), kafka.bootstrap(), name);
    cfg.postgres.publication = pub;
    cfg.postgres.create_publication = false;
    slots_.emplace_back(cfg.postgres.slot, dbname);
    return cfg;
  }

  void TearDown() override {
    for (const auto& [slot, db] : slots_) {
      pg.exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '" + slot +
                  "' AND NOT active",
              db);
    }
  }

  static std::string insert(const std::string& table, const std::string& id, const std::string& type = "T") {
    return "INSERT INTO " + table + " (id, aggregatetype, aggregateid, payload) VALUES ('" + id + "', '" + type +
           "', 'k', '{\"id\": \"" + id + "\"}');";
  }

  static std::vector<std::string> ids(const std::vector<ConsumedRecord>& records) {
    std::vector<std::string> out;
    for (const auto& r : records) out.push_back(r.header("id").value_or("?"));
    std::sort(out.begin(), out.end());
    return out;
  }

  // True when the slot still holds a change of the publication (nothing was confirmed past it).
  bool slot_holds_changes(const std::string& slot, const std::string& pub) {
    const auto n = pg.query_value("SELECT count(*) FROM pg_logical_slot_peek_binary_changes('" + slot +
                                  "', NULL, NULL, 'proto_version', '1', 'publication_names', '" + pub + "')");
    return n && *n != "0";
  }

  std::vector<std::pair<std::string, std::string>> slots_;
};

TEST_F(LayoutTest, APartitionedOutboxUnderAnAllTablesPublicationArrivesThroughItsLeavesAndSubPartitions) {
  pg.exec(std::string("CREATE TABLE lay_all (") + kColumns +
          ") PARTITION BY LIST (aggregatetype);"
          "CREATE TABLE lay_all_a PARTITION OF lay_all FOR VALUES IN ('A');"
          "CREATE TABLE lay_all_b PARTITION OF lay_all FOR VALUES IN ('B') PARTITION BY HASH (id);"
          "CREATE TABLE lay_all_b0 PARTITION OF lay_all_b FOR VALUES WITH (MODULUS 2, REMAINDER 0);"
          "CREATE TABLE lay_all_b1 PARTITION OF lay_all_b FOR VALUES WITH (MODULUS 2, REMAINDER 1);"
          "CREATE PUBLICATION lay_all_pub FOR ALL TABLES");
  RelayRunner relay(relay_config("lay_all", "lay_all_pub"));
  ASSERT_FALSE(relay.done()) << relay.outcome().reason;
  pg.exec(insert("lay_all", "a1", "A") + insert("lay_all", "b1", "B") + insert("lay_all", "b2", "B") +
          insert("lay_all", "b3", "B"));
  // A partition created mid-stream: its OID is new, its ancestry is looked up then.
  pg.exec("CREATE TABLE lay_all_c PARTITION OF lay_all FOR VALUES IN ('C');" + insert("lay_all", "c1", "C"));
  EXPECT_EQ(ids(read_topic(kafka.bootstrap(), "lay_all.A", 1, 30s)), (std::vector<std::string>{"a1"}));
  EXPECT_EQ(ids(read_topic(kafka.bootstrap(), "lay_all.B", 3, 30s)), (std::vector<std::string>{"b1", "b2", "b3"}));
  EXPECT_EQ(ids(read_topic(kafka.bootstrap(), "lay_all.C", 1, 30s)), (std::vector<std::string>{"c1"}));
  EXPECT_FALSE(relay.done()) << relay.outcome().reason;
  pg.exec("DROP PUBLICATION lay_all_pub");
}

TEST_F(LayoutTest, AnExplicitPublicationWithoutViaRootIsRelayedWithColumnsInAnotherOrder) {
  pg.exec(std::string("CREATE TABLE lay_leaf (") + kColumns +
          ") PARTITION BY LIST (aggregatetype);"
          // Created apart with another column order and attached: mapped by name, not position.
          "CREATE TABLE lay_leaf_x (payload jsonb, created_at timestamptz DEFAULT now(), type text, "
          "aggregateid text, aggregatetype text NOT NULL, id text NOT NULL);"
          "ALTER TABLE lay_leaf ATTACH PARTITION lay_leaf_x FOR VALUES IN ('X');"
          "CREATE PUBLICATION lay_leaf_pub FOR TABLE lay_leaf WITH (publish = 'insert')");
  RelayRunner relay(relay_config("lay_leaf", "lay_leaf_pub"));
  ASSERT_FALSE(relay.done()) << relay.outcome().reason;
  pg.exec(insert("lay_leaf", "x1", "X"));
  const auto got = read_topic(kafka.bootstrap(), "lay_leaf.X", 1, 30s);
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].header("id"), "x1");
  EXPECT_EQ(got[0].key, "k");
  EXPECT_EQ(got[0].value, "{\"id\": \"x1\"}");
}

TEST_F(LayoutTest, InheritanceChildrenArriveUnderTheirOwnNamesAndAreRelayed) {
  pg.exec(std::string("CREATE TABLE lay_inh (") + kColumns +
          ");"
          "CREATE TABLE lay_inh_2026 (archived boolean DEFAULT false) INHERITS (lay_inh);"
          "CREATE TABLE lay_inh_2026_q1 () INHERITS (lay_inh_2026);"
          "CREATE PUBLICATION lay_inh_pub FOR TABLE lay_inh WITH (publish = 'insert')");
  RelayRunner relay(relay_config("lay_inh", "lay_inh_pub"));
  ASSERT_FALSE(relay.done()) << relay.outcome().reason;
  pg.exec(insert("lay_inh", "p1") + insert("lay_inh_2026", "c1") + insert("lay_inh_2026_q1", "g1"));
  EXPECT_EQ(ids(read_topic(kafka.bootstrap(), "lay_inh.T", 3, 30s)), (std::vector<std::string>{"c1", "g1", "p1"}));
}

TEST_F(LayoutTest, AnInheritanceChildThePublicationLeavesOutIsRefusedAtConnect) {
  pg.exec(std::string("CREATE TABLE lay_only (") + kColumns +
          ");"
          "CREATE PUBLICATION lay_only_pub FOR TABLE lay_only WITH (publish = 'insert');"
          // Created after the publication: never published, its rows would never arrive.
          "CREATE TABLE lay_only_late () INHERITS (lay_only)");
  RelayRunner relay(relay_config("lay_only", "lay_only_pub"));
  PGOUTBOX_ASSERT_EVENTUALLY(relay.done(), 30s);
  EXPECT_EQ(relay.outcome().kind, relay::Outcome::Kind::fatal);
  EXPECT_EQ(relay.outcome().cause, relay::Fatal::publication) << relay.outcome().reason;
  EXPECT_NE(relay.outcome().reason.find("lay_only_late"), std::string::npos) << relay.outcome().reason;
  EXPECT_NE(relay.outcome().reason.find("ADD TABLE"), std::string::npos) << relay.outcome().reason;
}

TEST_F(LayoutTest, AFamilyMemberThatCannotBeMappedStopsWithTheMappingCodeBeforeConfirmingIt) {
  pg.exec(std::string("CREATE TABLE lay_cols (") + kColumns +
          ");"
          "CREATE TABLE lay_cols_kid () INHERITS (lay_cols);"
          // A column list leaves the child's payload out of the stream.
          "CREATE PUBLICATION lay_cols_pub FOR TABLE ONLY lay_cols, ONLY lay_cols_kid (id, aggregatetype, aggregateid) "
          "WITH (publish = 'insert')");
  auto cfg = relay_config("lay_cols", "lay_cols_pub");
  {
    RelayRunner relay(cfg);
    ASSERT_FALSE(relay.done()) << relay.outcome().reason;
    pg.exec(insert("lay_cols_kid", "k1"));
    PGOUTBOX_ASSERT_EVENTUALLY(relay.done(), 30s);
    EXPECT_EQ(relay.outcome().cause, relay::Fatal::mapping) << relay.outcome().reason;
    EXPECT_EQ(relay::exit_code(relay.outcome().cause), 17);
    EXPECT_NE(relay.outcome().reason.find("public.lay_cols_kid"), std::string::npos) << relay.outcome().reason;
    EXPECT_NE(relay.outcome().reason.find("public.lay_cols"), std::string::npos) << relay.outcome().reason;
    EXPECT_NE(relay.outcome().reason.find("Fix:"), std::string::npos) << relay.outcome().reason;
  }
  EXPECT_TRUE(slot_holds_changes(cfg.postgres.slot, "lay_cols_pub")) << "confirmed past the unmapped row";
}

// A partition dropped before pgoutbox read its rows: the catalog can no longer say whose it was.
TEST_F(LayoutTest, ARowOfADroppedPartitionStopsTheRelayInsteadOfBeingIgnored) {
  pg.exec(std::string("CREATE TABLE lay_gone (") + kColumns +
          ") PARTITION BY LIST (aggregatetype);"
          "CREATE TABLE lay_gone_a PARTITION OF lay_gone FOR VALUES IN ('A');"
          "CREATE PUBLICATION lay_gone_pub FOR TABLE lay_gone WITH (publish = 'insert')");
  auto cfg = relay_config("lay_gone", "lay_gone_pub");
  {
    RelayRunner relay(cfg);  // creates the slot
    ASSERT_FALSE(relay.done()) << relay.outcome().reason;
    relay.stop();
  }
  pg.exec(insert("lay_gone", "a1", "A"));
  pg.exec("ALTER TABLE lay_gone DETACH PARTITION lay_gone_a; DROP TABLE lay_gone_a");
  pg.exec("CREATE TABLE lay_gone_a2 PARTITION OF lay_gone FOR VALUES IN ('A')");
  RelayRunner relay(cfg);
  PGOUTBOX_ASSERT_EVENTUALLY(relay.done(), 30s);
  EXPECT_EQ(relay.outcome().cause, relay::Fatal::mapping) << relay.outcome().reason;
  EXPECT_NE(relay.outcome().reason.find("no longer exists"), std::string::npos) << relay.outcome().reason;
  EXPECT_TRUE(slot_holds_changes(cfg.postgres.slot, "lay_gone_pub")) << "confirmed past the row";
}

// Detached (not dropped) before pgoutbox read its rows, under an explicit publication: the stream
// carried it, so it was a member then; today's catalog no longer says so.
TEST_F(LayoutTest, ARowOfAPartitionDetachedSinceStopsTheRelayInsteadOfBeingIgnored) {
  pg.exec(std::string("CREATE TABLE lay_det (") + kColumns +
          ") PARTITION BY LIST (aggregatetype);"
          "CREATE TABLE lay_det_a PARTITION OF lay_det FOR VALUES IN ('A');"
          "CREATE PUBLICATION lay_det_pub FOR TABLE lay_det WITH (publish = 'insert')");
  auto cfg = relay_config("lay_det", "lay_det_pub");
  {
    RelayRunner relay(cfg);  // creates the slot
    ASSERT_FALSE(relay.done()) << relay.outcome().reason;
    relay.stop();
  }
  pg.exec(insert("lay_det", "a1", "A"));
  pg.exec("ALTER TABLE lay_det DETACH PARTITION lay_det_a");
  RelayRunner relay(cfg);
  PGOUTBOX_ASSERT_EVENTUALLY(relay.done(), 30s);
  EXPECT_EQ(relay.outcome().cause, relay::Fatal::mapping) << relay.outcome().reason;
  EXPECT_NE(relay.outcome().reason.find("public.lay_det_a"), std::string::npos) << relay.outcome().reason;
  EXPECT_TRUE(slot_holds_changes(cfg.postgres.slot, "lay_det_pub")) << "confirmed past the row";
}

// bytea_output = escape set for the database, and DateStyle and TimeZone for the role in it:
// the payload is relayed byte-exact and the mapped timestamp is right.
TEST_F(LayoutTest, DatabaseAndRoleSettingsDoNotChangeWhatIsRelayed) {
  pg.exec("CREATE DATABASE lay_settings");
  pg.exec("ALTER DATABASE lay_settings SET bytea_output = 'escape'");
  pg.exec("ALTER ROLE postgres IN DATABASE lay_settings SET DateStyle = 'SQL, DMY'");
  pg.exec("ALTER ROLE postgres IN DATABASE lay_settings SET TimeZone = 'Asia/Kathmandu'");
  pg.exec("ALTER ROLE postgres IN DATABASE lay_settings SET IntervalStyle = 'sql_standard'");
  pg.exec(
      "CREATE TABLE lay_bytes (id text NOT NULL, aggregatetype text NOT NULL, aggregateid text, payload bytea, "
      "occurred timestamptz); CREATE PUBLICATION lay_bytes_pub FOR TABLE lay_bytes WITH (publish = 'insert')",
      "lay_settings");
  auto cfg = relay_config("lay_bytes", "lay_bytes_pub", "lay_settings");
  cfg.tables[0].columns.type.reset();
  cfg.tables[0].columns.timestamp = "occurred";
  RelayRunner relay(cfg);
  ASSERT_FALSE(relay.done()) << relay.outcome().reason;
  pg.exec("INSERT INTO lay_bytes VALUES ('b1', 'B', 'k', '\\x00ff5c7801'::bytea, '2026-01-02 03:04:05.678+00')",
          "lay_settings");
  const auto got = read_topic(kafka.bootstrap(), "lay_bytes.B", 1, 30s);
  ASSERT_EQ(got.size(), 1U) << (relay.done() ? relay.outcome().reason : "");
  EXPECT_EQ(got[0].value, std::string("\x00\xff\x5c\x78\x01", 5));
  EXPECT_EQ(got[0].timestamp_ms, 1'767'323'045'678);
  EXPECT_FALSE(relay.done()) << relay.outcome().reason;
}

// pgoutbox_received_lsn: Relation and Type messages carry 0 as their position, and a quiet outbox
// is followed through keepalives.
TEST_F(LayoutTest, TheReceivedPositionNeverDropsToZeroAndFollowsKeepalives) {
  struct Positions : relay::Observer {
    std::mutex mutex;
    std::vector<Lsn> seen;
    void received_lsn(Lsn lsn) override {
      const std::lock_guard lock(mutex);
      seen.push_back(lsn);
    }
    Lsn last() {
      const std::lock_guard lock(mutex);
      return seen.empty() ? Lsn{} : seen.back();
    }
  } positions;
  pg.exec(std::string("CREATE TABLE lay_recv (") + kColumns +
          "); CREATE TABLE lay_recv_other (x int);"
          "CREATE PUBLICATION lay_recv_pub FOR TABLE lay_recv WITH (publish = 'insert')");
  auto cfg = relay_config("lay_recv", "lay_recv_pub");
  RelayRunner relay(cfg, &positions);
  ASSERT_FALSE(relay.done()) << relay.outcome().reason;
  pg.exec(insert("lay_recv", "r1"));
  ASSERT_EQ(read_topic(kafka.bootstrap(), "lay_recv.T", 1, 30s).size(), 1U);
  // WAL that the publication does not carry: only keepalives can report it.
  pg.exec("INSERT INTO lay_recv_other SELECT generate_series(1, 1000)");
  const auto after = Lsn::parse(*pg.query_value("SELECT pg_current_wal_lsn()"));
  ASSERT_TRUE(after);
  PGOUTBOX_EXPECT_EVENTUALLY(positions.last() >= *after, 30s);
  relay.stop();
  const std::lock_guard lock(positions.mutex);
  bool nonzero = false;
  for (std::size_t i = 0; i < positions.seen.size(); ++i) {
    if (nonzero) {
      ASSERT_FALSE(positions.seen[i].is_zero()) << "received position fell to 0 at report " << i;
    }
    nonzero = nonzero || !positions.seen[i].is_zero();
  }
  EXPECT_TRUE(nonzero);
}

}  // namespace
}  // namespace pgoutbox::test
