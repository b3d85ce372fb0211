// docs/migrating.md "Record formats", proven against the real thing: the pinned Debezium 3.6.1 on
// Kafka Connect writes the same outbox rows through JsonConverter in four configurations (with
// and without schemas.enable, with and without the router's table.expand.json.payload and
// route.tombstone.on.empty.payload), each connector on a slot of its own; then pgoutbox, on slots
// created at the same position, with the configuration `config from-debezium` makes of each
// connector. Every record must match byte for byte: key, value (or both tombstones), the `id`
// header and the partition. The rows cover each payload type (jsonb, json, text, bytea), each key
// type (varchar, uuid, bigint, a nullable text), NULL and blank payloads, a NULL key, unicode,
// control characters and a 300 kB payload; and message outbox envelopes, which Debezium relays
// with DecodeLogicalDecodingMessageContent before the router.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "child_process.h"
#include "connect_standalone.h"
#include "kafka_client.h"
#include "pgoutbox/debezium/from_debezium.h"
#include "pgoutbox_process.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kJsonConverter = "org.apache.kafka.connect.json.JsonConverter";
constexpr int kPartitions = 3;

struct Combination {
  const char* name;
  bool schemas;
  bool expand;
  bool tombstone;
};
constexpr Combination kCombinations[] = {
    {"sj", true, false, false}, {"nj", false, false, false}, {"sx", true, true, false}, {"nx", false, true, true}};

// Each outbox table with its routing value (the topic's suffix) and its rows' values after the id.
struct Table {
  const char* name;
  const char* routed;
  const char* ddl;
  std::vector<std::string> rows;  // "(aggregateid, payload)" SQL tuples
};

std::vector<Table> tables() {
  return {
      {"fmt_jsonb",
       "Jsonb",
       "aggregateid varchar(255) NOT NULL, payload jsonb",
       {R"(('order-1', '{"b": true, "f": 1.5, "n": 1, "big": 3000000000, "d": 1e10, "small": 0.0001, "arr": [1, 2, 3], "nul": null, "obj": {"x": "y", "deep": {"z": [true, false]}}, "note": "héllo ✓ 😀", "ctl": "tab\there\u0001"}'))",
        R"(('', '{}'))", R"(('order-2', NULL))", R"(('order-3', '"just a string"'))",
        R"(('order-3', '[1, "a", {"k": 2}]'))",
        R"(('order-4', jsonb_build_object('blob', repeat('x', 300000), 'n', 7)))",
        R"(('order-5', '{"items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}], "e": [], "a.b": 1, "sp ace": 2}'))",
        R"(('ключ-✓', '{"neg": -2.5e-7, "int": -2147483648, "long": -2147483649}'))"}},
      {"fmt_json",
       "Json",
       "aggregateid uuid NOT NULL, payload json",
       {R"(('33333333-1111-1111-1111-111111111111', '{"n":1,  "spaced" : "kept" , "x": [1.25, 2.5]}'))",
        R"(('33333333-1111-1111-1111-111111111111', '{"dup": 1, "other": true, "dup": "last"}'))",
        R"(('33333333-1111-1111-1111-111111111112', ' {"leading": "space"}'))",
        R"(('33333333-1111-1111-1111-111111111112', '{"esc": "\u00e9\n\"q\"", "slash": "a\/b"}'))"}},
      {"fmt_text",
       "Text",
       "aggregateid bigint NOT NULL, payload text",
       {R"((42, 'plain text "quoted" \ back'))", R"((-7, ''))", R"((9223372036854775807, '{"looks": "json"}'))",
        R"((1, '   '))", R"((2, E'line1\nline2\ttab\u0001'))"}},
      {"fmt_bytea",
       "Bytea",
       "aggregateid text, payload bytea",
       {R"(('k1', '\x00ff10'))", R"((NULL, '\x'))", R"(('k3', convert_to('héllo', 'UTF8')))"}},
  };
}

// Message outbox envelopes (pg_logical_emit_message(true, 'fmtmsg', …)), relayed by Debezium with
// DecodeLogicalDecodingMessageContent before the router, in every combination but the one that
// writes blank payloads as tombstones (from-debezium refuses that one for messages).
constexpr const char* kMessagePrefix = "fmtmsg";
constexpr const char* kMessageRouted = "Msg";
std::vector<std::string> messages() {
  return {
      R"({"id": "m-1", "aggregatetype": "Msg", "aggregateid": "order-1", "payload": {"b": true, "f": 1.5, "n": 1, "big": 3000000000, "nul": null, "e": [], "obj": {"x": "y", "deep": {"z": [true]}}, "arr": [1, 2], "note": "héllo ✓ 😀", "ctl": "tab\there"}})",
      R"({"id": "m-2", "aggregatetype": "Msg", "aggregateid": "k2", "payload": "plain \"text\" \\ back"})",
      R"({"id": "m-3", "aggregatetype": "Msg", "aggregateid": "k3", "payload": "{\"inner\": [1, 2], \"x\": {\"y\": 1.25}}"})",
      R"({"id": "m-4", "aggregatetype": "Msg", "aggregateid": 42, "payload": {"a": 1}})",
      R"({"id": "m-5", "aggregatetype": "Msg", "aggregateid": "k5", "payload": [{"sku": "a", "qty": 1}, {"sku": "b"}]})",
      R"({"id": "m-6", "aggregatetype": "Msg", "aggregateid": 9000000000, "payload": 7})",
      R"({"id": 7, "aggregatetype": "Msg", "aggregateid": "k7", "type": "Created", "headers": {"traceparent": "00-ab-cd-01"}, "payload": {}})",
      R"({"aggregatetype": "Msg", "id": "m-8", "aggregateid": "ключ", "payload": {"s": "x", "d": -2.5e-7, "l": -2147483649}, "extra": [1.5, 2.5]})"};
}

std::string include_list() {
  std::string out;
  for (const auto& t : tables()) out += (out.empty() ? "public." : ",public.") + std::string(t.name);
  return out;
}

ConnectorSettings connector(const PgCluster& pg, const Combination& c) {
  auto s = outbox_connector(std::string("formats_") + c.name, pg.port(), std::string("fmt_") + c.name, "fmt_pub",
                            include_list());
  s["key.converter"] = kJsonConverter;
  s["value.converter"] = kJsonConverter;
  s["key.converter.schemas.enable"] = c.schemas ? "true" : "false";
  s["value.converter.schemas.enable"] = c.schemas ? "true" : "false";
  s["transforms.outbox.route.topic.replacement"] = std::string("dbz_") + c.name + ".${routedByValue}";
  if (c.expand) s["transforms.outbox.table.expand.json.payload"] = "true";
  if (c.tombstone) s["transforms.outbox.route.tombstone.on.empty.payload"] = "true";
  if (!c.tombstone) {
    s["transforms"] = "decode,outbox";
    s["transforms.decode.type"] = "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent";
    s["message.prefix.include.list"] = kMessagePrefix;
  }
  return s;
}

std::string shown(const std::optional<std::string>& bytes) {
  if (!bytes) return "(null)";
  return bytes->size() > 400 ? bytes->substr(0, 400) + "… (" + std::to_string(bytes->size()) + " bytes)" : *bytes;
}

std::map<std::string, ConsumedRecord> by_id(const std::vector<ConsumedRecord>& records) {
  std::map<std::string, ConsumedRecord> out;
  for (const auto& r : records) out[r.header("id").value_or("")] = r;
  return out;
}

// What one combination's records are compared in: each table's topic, and the messages'.
struct Stream {
  std::string routed;
  std::size_t count;
  std::string label;
};
std::vector<Stream> streams(const Combination& c) {
  std::vector<Stream> out;
  for (const auto& t : tables()) out.push_back({t.routed, t.rows.size(), t.name});
  if (!c.tombstone) out.push_back({kMessageRouted, messages().size(), std::string("message:") + kMessagePrefix});
  return out;
}

TEST(DebeziumFormats, PgoutboxWritesJsonConvertersBytesInEveryConfiguration) {
  ASSERT_TRUE(std::filesystem::exists(debezium_libs() + "/debezium-connector-postgres-3.6.1.Final.jar"))
      << "the Debezium jars are not in " << debezium_libs() << "; run scripts/setup.sh";
  auto& pg = shared_postgres();
  auto& kafka = shared_kafka();
  const auto all = tables();
  std::string publication = "CREATE PUBLICATION fmt_pub FOR TABLE ";
  for (std::size_t i = 0; i < all.size(); ++i) {
    pg.exec(std::string("CREATE TABLE ") + all[i].name + " (id uuid PRIMARY KEY, aggregatetype text NOT NULL, type " +
            "text NOT NULL, " + all[i].ddl + ")");
    publication += (i == 0 ? "" : ", ") + std::string(all[i].name);
  }
  pg.exec(publication);
  for (const auto& c : kCombinations) {
    for (const char* side : {"", "_pgo"}) {
      pg.exec(std::string("SELECT pg_create_logical_replication_slot('fmt_") + c.name + side + "', 'pgoutput')");
    }
    for (const auto& t : streams(c)) {
      create_topic(kafka.bootstrap(), std::string("dbz_") + c.name + "." + t.routed, kPartitions);
      create_topic(kafka.bootstrap(), std::string("pgo_") + c.name + "." + t.routed, kPartitions);
    }
  }
  // One transaction per row, every slot before the first.
  int serial = 0;
  for (const auto& t : all) {
    for (const auto& row : t.rows) {
      char id[64];
      std::snprintf(id, sizeof id, "00000000-0000-0000-0000-%012d", ++serial);
      const auto open = row.find('(');
      pg.exec(std::string("INSERT INTO ") + t.name + " (id, aggregatetype, type, aggregateid, payload) VALUES ('" + id +
              "', '" + t.routed + "', 'Created', " + row.substr(open + 1));
    }
  }

  for (const auto& envelope : messages()) {
    pg.exec("SELECT pg_logical_emit_message(true, '" + std::string(kMessagePrefix) + "', '" + envelope + "')");
  }

  ScratchDir scratch("dbz-formats", std::nullopt);
  // 1. Debezium, the four connectors in one worker.
  std::vector<ConnectorSettings> connectors;
  for (const auto& c : kCombinations) connectors.push_back(connector(pg, c));
  std::map<std::string, std::vector<ConsumedRecord>> debezium;  // by topic suffix "sj.Jsonb"
  {
    // The worker's converters are required and each connector overrides them.
    ConnectStandalone connect(scratch.path(), kafka.bootstrap(),
                              {{"key.converter", "org.apache.kafka.connect.storage.StringConverter"},
                               {"value.converter", "org.apache.kafka.connect.storage.StringConverter"}},
                              connectors);
    for (const auto& c : kCombinations) {
      for (const auto& t : streams(c)) {
        const std::string topic = std::string("dbz_") + c.name + "." + t.routed;
        auto records = read_topic(kafka.bootstrap(), topic, t.count, 3min);
        ASSERT_EQ(records.size(), t.count) << topic << "\n" << tail_of(connect.log());
        debezium[std::string(c.name) + "." + t.routed] = std::move(records);
      }
    }
    ASSERT_TRUE(connect.stop()) << tail_of(connect.log());
  }

  // 2. pgoutbox, one process per connector, configured by from-debezium.
  std::vector<std::unique_ptr<PgoutboxProcess>> relays;
  for (std::size_t k = 0; k < std::size(kCombinations); ++k) {
    const auto& c = kCombinations[k];
    const auto conversion = debezium::from_debezium(connector_json(connectors[k]));
    const std::string dir = scratch.path() + "/" + c.name;
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/pgoutbox.yaml") << conversion.yaml;
    std::vector<std::string> env = {"PGOUTBOX_KAFKA_BROKERS=" + kafka.bootstrap(),
                                    "PGOUTBOX_CHECKPOINT_TOPIC=pgoutbox.checkpoints.formats",
                                    std::string("PGOUTBOX_POSTGRES_SLOT=fmt_") + c.name + "_pgo"};
    for (std::size_t i = 0; i < all.size(); ++i) {
      env.push_back("PGOUTBOX_TABLES_" + std::to_string(i) + "_TOPIC=pgo_" + c.name + ".${aggregatetype}");
    }
    if (!c.tombstone) env.push_back(std::string("PGOUTBOX_MESSAGES_0_TOPIC=pgo_") + c.name + ".${aggregatetype}");
    relays.push_back(
        std::make_unique<PgoutboxProcess>(PGOUTBOX_BINARY, dir + "/pgoutbox.yaml", dir + "/pgoutbox.log", env));
  }

  // 3. Record by record.
  for (std::size_t k = 0; k < std::size(kCombinations); ++k) {
    const auto& c = kCombinations[k];
    const std::string log = scratch.path() + "/" + c.name + "/pgoutbox.log";
    std::size_t identical = 0, total = 0;
    for (const auto& t : streams(c)) {
      const std::string topic = std::string("pgo_") + c.name + "." + t.routed;
      const auto mine = by_id(read_topic(kafka.bootstrap(), topic, t.count, 2min));
      const auto theirs = by_id(debezium[std::string(c.name) + "." + t.routed]);
      ASSERT_EQ(mine.size(), theirs.size()) << topic << "\n" << tail_of(log);
      for (const auto& [id, expected] : theirs) {
        const auto it = mine.find(id);
        ASSERT_NE(it, mine.end()) << topic << ": no record with id " << id;
        const auto& got = it->second;
        const std::string where = std::string(c.name) + " " + t.label + " id " + id;
        ++total;
        const bool same = got.key == expected.key && got.value == expected.value &&
                          got.partition == expected.partition && got.header("id") == expected.header("id");
        identical += same ? 1 : 0;
        EXPECT_EQ(shown(got.key), shown(expected.key)) << where;
        EXPECT_EQ(shown(got.value), shown(expected.value)) << where;
        EXPECT_EQ(got.value.has_value(), expected.value.has_value()) << where << ": tombstone on one side only";
        EXPECT_EQ(got.partition, expected.partition) << where;
        EXPECT_EQ(got.header("id"), expected.header("id")) << where;
        for (const auto& [name, value] : got.headers) EXPECT_EQ(name, "id") << where << ": header " << name;
      }
    }
    std::printf(
        "FORMAT debezium-json schemas=%s expand_json_payload=%s tombstone_on_empty=%s: %zu of %zu records "
        "identical to Debezium 3.6.1's\n",
        c.schemas ? "true" : "false", c.expand ? "true" : "false", c.tombstone ? "true" : "false", identical, total);
  }
  for (auto& relay : relays) {
    relay->signal(SIGTERM);
    EXPECT_EQ(relay->wait_exit(30s), 0);
  }
  for (const auto& c : kCombinations) {
    for (const char* side : {"", "_pgo"}) pg.drop_slot_when_free(std::string("fmt_") + c.name + side);
  }
}

}  // namespace
}  // namespace pgoutbox::test
