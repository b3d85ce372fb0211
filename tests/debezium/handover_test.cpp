// docs/migrating.md "Switching from Debezium", end to end on the real Postgres and Kafka: Debezium 3.6.1
// (Kafka Connect standalone, the pinned jars) publishes outbox rows, stops; more rows are
// committed while nothing runs; pgoutbox starts on the same slot and publication with the
// configuration `config from-debezium` made from the connector's. A consumer must not see a
// difference: every event in the same topic, each key on one partition (murmur2 on both sides),
// the key, the value bytes and the id header as Debezium wrote them, nothing lost.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "child_process.h"
#include "connect_standalone.h"
#include "kafka_client.h"
#include "pgoutbox/debezium/from_debezium.h"
#include "pgoutbox_process.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

constexpr const char* kSlot = "dbz_handover";
constexpr const char* kTopic = "handover.Order";
constexpr int kPartitions = 6;
constexpr int kKeys = 12;

// The connector as a user would have it, one map for both Connect (as properties) and the converter (as JSON).
ConnectorSettings connector(const PgCluster& pg) {
  auto s = outbox_connector("handover", pg.port(), kSlot, "dbz_handover_pub", "public.dbz_outbox");
  s["key.converter"] = "org.apache.kafka.connect.storage.StringConverter";
  s["value.converter"] = "org.apache.kafka.connect.storage.StringConverter";
  s["transforms.outbox.route.topic.replacement"] = "handover.${routedByValue}";
  return s;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// `count` events from `first` on, keys spread over kKeys aggregates, one transaction each.
void insert_events(const PgCluster& pg, int first, int count) {
  for (int i = first; i < first + count; ++i) {
    pg.exec(
        "INSERT INTO dbz_outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
        "(gen_random_uuid(), 'Order', 'order-" +
        std::to_string(i % kKeys) + "', 'OrderCreated', jsonb_build_object('n', " + std::to_string(i) +
        ", 'note', 'event " + std::to_string(i) + "'))");
  }
}

TEST(DebeziumHandover, PgoutboxTakesOverTheSlotAndConsumersSeeNoDifference) {
  const auto libs = debezium_libs();
  ASSERT_TRUE(std::filesystem::exists(libs + "/debezium-connector-postgres-3.6.1.Final.jar"))
      << "the Debezium jars are not in " << libs << "; run scripts/setup.sh";
  auto& pg = shared_postgres();
  auto& kafka = shared_kafka();
  pg.exec(
      "CREATE TABLE dbz_outbox (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) "
      "NOT NULL, type varchar(255) NOT NULL, payload jsonb);"
      "CREATE PUBLICATION dbz_handover_pub FOR TABLE dbz_outbox");
  pg.exec(std::string("SELECT pg_create_logical_replication_slot('") + kSlot + "', 'pgoutput')");
  create_topic(kafka.bootstrap(), kTopic, kPartitions);
  ScratchDir scratch("dbz-handover", std::nullopt);
  const auto settings = connector(pg);

  // 1. Debezium publishes the first events.
  ConnectStandalone connect(scratch.path(), kafka.bootstrap(),
                            {{"key.converter", "org.apache.kafka.connect.storage.StringConverter"},
                             {"value.converter", "org.apache.kafka.connect.storage.StringConverter"},
                             {"producer.acks", "all"},
                             {"producer.enable.idempotence", "true"}},
                            {settings});
  const std::string connect_log = connect.log();
  constexpr int kBefore = 40, kAfter = 40;
  insert_events(pg, 0, kBefore);
  const auto by_debezium = read_topic(kafka.bootstrap(), kTopic, kBefore, std::chrono::minutes(3));
  ASSERT_GE(by_debezium.size(), static_cast<std::size_t>(kBefore)) << tail_of(connect_log);

  // 2. Debezium stops; events keep being committed; its slot is free.
  ASSERT_TRUE(connect.stop()) << tail_of(connect_log);
  for (int i = 0; i < 100 && slot_active_pid(pg.dsn(), kSlot); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(slot_active_pid(pg.dsn(), kSlot).has_value());
  insert_events(pg, kBefore, kAfter);

  // 3. pgoutbox on the converted configuration, the brokers from the environment.
  const auto conversion = debezium::from_debezium(connector_json(settings));
  write(scratch.path() + "/pgoutbox.yaml", conversion.yaml);
  const std::string pgoutbox_log = scratch.path() + "/pgoutbox.log";
  PgoutboxProcess relay(
      PGOUTBOX_BINARY, scratch.path() + "/pgoutbox.yaml", pgoutbox_log,
      {"PGOUTBOX_KAFKA_BROKERS=" + kafka.bootstrap(), "PGOUTBOX_CHECKPOINT_TOPIC=dbz_handover.checkpoints"});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  std::vector<ConsumedRecord> all;
  std::set<std::string> ids;
  while (std::chrono::steady_clock::now() < deadline) {
    all = read_topic(kafka.bootstrap(), kTopic, kBefore + kAfter, std::chrono::seconds(5));
    ids.clear();
    for (const auto& r : all) ids.insert(r.header("id").value_or(""));
    if (ids.size() >= static_cast<std::size_t>(kBefore + kAfter) || !relay.running()) break;
  }
  relay.signal(SIGTERM);
  EXPECT_EQ(relay.wait_exit(std::chrono::seconds(30)), 0) << tail_of(pgoutbox_log);

  // 4. What a consumer sees: every event, and each key on one partition with the same bytes.
  std::map<std::string, std::string> payload_of;  // id -> payload as stored
  std::map<std::string, std::string> key_of;
  {
    auto conn = pg.connect();
    PGresult* res = PQexec(conn.get(), "SELECT id::text, aggregateid, payload::text FROM dbz_outbox");
    ASSERT_EQ(PQresultStatus(res), PGRES_TUPLES_OK);
    for (int i = 0; i < PQntuples(res); ++i) {
      key_of[PQgetvalue(res, i, 0)] = PQgetvalue(res, i, 1);
      payload_of[PQgetvalue(res, i, 0)] = PQgetvalue(res, i, 2);
    }
    PQclear(res);
  }
  ASSERT_EQ(payload_of.size(), static_cast<std::size_t>(kBefore + kAfter));
  std::map<std::string, std::set<int32_t>> partitions_of_key;
  for (const auto& r : all) {
    const auto id = r.header("id");
    ASSERT_TRUE(id.has_value()) << "a record without the id header at offset " << r.offset;
    ASSERT_TRUE(payload_of.count(*id)) << "a record for no event: " << *id;
    EXPECT_EQ(r.key, key_of[*id]) << *id;
    EXPECT_EQ(r.value, payload_of[*id]) << *id;
    EXPECT_FALSE(r.header("type").has_value()) << "Debezium sent no type header; pgoutbox must not either";
    partitions_of_key[key_of[*id]].insert(r.partition);
  }
  for (const auto& [id, payload] : payload_of) EXPECT_TRUE(ids.count(id)) << "lost: " << id;
  ASSERT_EQ(partitions_of_key.size(), static_cast<std::size_t>(kKeys));
  for (const auto& [key, partitions] : partitions_of_key) {
    EXPECT_EQ(partitions.size(), 1U) << key << " moved partition at the handover";
  }
  pg.drop_slot_when_free(kSlot);
}

}  // namespace
}  // namespace pgoutbox::test
