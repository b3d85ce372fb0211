#include "pgoutbox/outbox/mapping.h"

#include "pgoutbox/outbox/header_guard.h"

#include <gtest/gtest.h>

#include <map>

namespace pgoutbox::outbox {
namespace {

using pgoutput::ColumnKind;
using pgoutput::ColumnValue;

constexpr pgoutput::Oid kUuid = 2950, kText = 25, kJsonb = 3802, kJson = 114, kBytea = 17, kTimestamptz = 1184,
                        kInt8 = 20;

pgoutput::RelationCache cache;

const pgoutput::Relation& relation(pgoutput::Oid relid, const std::string& schema, const std::string& name,
                                   std::vector<std::pair<std::string, pgoutput::Oid>> columns) {
  pgoutput::RelationData msg;
  msg.relid = relid;
  msg.nspname = schema;
  msg.relname = name;
  for (const auto& [col, oid] : columns) msg.columns.push_back({0, col, oid, -1});
  return cache.apply(msg);
}

const pgoutput::Relation& debezium_outbox(pgoutput::Oid relid = 1000) {
  return relation(
      relid, "public", "outbox",
      {{"id", kUuid}, {"aggregatetype", kText}, {"aggregateid", kText}, {"type", kText}, {"payload", kJsonb}});
}

const pgoutput::Relation& debezium_outbox_named(pgoutput::Oid relid, const std::string& name) {
  return relation(
      relid, "public", name,
      {{"id", kUuid}, {"aggregatetype", kText}, {"aggregateid", kText}, {"type", kText}, {"payload", kJsonb}});
}

pgoutput::TupleData tuple(std::vector<std::optional<std::string_view>> values) {
  pgoutput::TupleData t;
  for (const auto& v : values) {
    t.columns.push_back(v ? ColumnValue{ColumnKind::text, *v} : ColumnValue{ColumnKind::null, {}});
  }
  return t;
}

config::TableConfig table(const std::string& name = "outbox") {
  config::TableConfig t;
  t.name = name;
  return t;
}

const TxnContext kTxn{Lsn{0x1234ABCD}, 1'700'000'000'123'456, 777};

Record build_ok(const ResolvedTable& rt, const pgoutput::TupleData& t) {
  auto result = rt.build(t, kTxn);
  if (auto* poison = std::get_if<Poison>(&result)) ADD_FAILURE() << "poison: " << poison->reason;
  return std::get<Record>(std::move(result));
}

TEST(Mapping, DebeziumDefaultsRouteKeyValueAndHeaders) {
  Mapping m({table()}, false);
  const auto* rt = m.resolve(debezium_outbox());
  ASSERT_NE(rt, nullptr);
  const auto rec = build_ok(
      *rt, tuple({"6f1c2a4e-9b7d-4c1e-8f00-0123456789ab", "Order", "order-42", "OrderCreated", R"({"total": 10})"}));
  EXPECT_EQ(rec.topic, "outbox.event.Order");
  EXPECT_EQ(rec.key, "order-42");
  EXPECT_EQ(rec.value, R"({"total": 10})");
  EXPECT_FALSE(rec.tombstone);
  EXPECT_EQ(rec.event_id, "6f1c2a4e-9b7d-4c1e-8f00-0123456789ab");
  ASSERT_EQ(rec.headers.size(), 2U);
  EXPECT_EQ(rec.headers[0].name, "id");
  EXPECT_EQ(rec.headers[0].value, rec.event_id);
  EXPECT_EQ(rec.headers[1].name, "type");
  EXPECT_EQ(rec.headers[1].value, "OrderCreated");
  EXPECT_EQ(rec.timestamp_ms, 1'700'000'000'123);  // the commit time
}

TEST(Mapping, CustomColumnsTemplateHeadersTimestampAndProvenance) {
  auto t = table("Order Events");
  t.schema = "Sales";
  t.columns = {"event_id",
               "kind",
               "order_no",
               "body",
               std::string("event_type"),
               std::string("meta"),
               std::string("occurred_at")};
  t.type_column_explicit = true;
  t.topic = "${kind}-events.${event_type}";
  Mapping m({t}, true);
  const auto& rel = relation(2000, "Sales", "Order Events",
                             {{"event_id", kInt8},
                              {"kind", kText},
                              {"order_no", kText},
                              {"body", kJson},
                              {"event_type", kText},
                              {"meta", kJsonb},
                              {"occurred_at", kTimestamptz}});
  const auto* rt = m.resolve(rel);
  ASSERT_NE(rt, nullptr);
  const auto rec =
      build_ok(*rt, tuple({"42", "order", "A-1", R"({"a": 1})", "Paid",
                           R"({"traceparent": "00-abc-01", "attempt": 3, "nested": {"x": [1, 2]}, "flag": true})",
                           "2026-11-29 08:00:00.123456+00"}));
  EXPECT_EQ(rec.topic, "order-events.Paid");
  EXPECT_EQ(rec.key, "A-1");
  EXPECT_EQ(rec.timestamp_ms, 1'795'939'200'123);
  const auto header = [&](const std::string& name) -> std::string {
    for (const auto& h : rec.headers) {
      if (h.name == name) return h.value;
    }
    return "<missing>";
  };
  EXPECT_EQ(header("id"), "42");
  EXPECT_EQ(header("type"), "Paid");
  EXPECT_EQ(header("traceparent"), "00-abc-01");
  EXPECT_EQ(header("attempt"), "3");
  EXPECT_EQ(header("nested"), R"({"x":[1,2]})");
  EXPECT_EQ(header("flag"), "true");
  EXPECT_EQ(header("pgoutbox.lsn"), "0/1234ABCD");
  EXPECT_EQ(header("pgoutbox.xid"), "777");
  EXPECT_EQ(header("pgoutbox.commit_time_us"), "1700000000123456");
}

TEST(Mapping, MappedColumnsAreEveryColumnTheMappingReadsWithItsRole) {
  // What check asks of each column (is it generated, is it published) covers the template's.
  auto t = table("outbox");
  t.columns = {"event_id",
               "kind",
               "order_no",
               "body",
               std::string("event_type"),
               std::string("meta"),
               std::string("occurred_at")};
  t.topic = "${kind}-events.${event_type}";
  std::vector<std::string> got;
  for (const auto& c : mapped_columns(t)) got.push_back(c.role + "=" + c.column);
  EXPECT_EQ(got, (std::vector<std::string>{"event id=event_id", "key=order_no", "payload=body", "event type=event_type",
                                           "headers=meta", "timestamp=occurred_at", "topic template reference=kind",
                                           "topic template reference=event_type"}));
  // The defaults: aggregatetype is read only through the default template.
  got.clear();
  for (const auto& c : mapped_columns(table("outbox"))) got.push_back(c.role + "=" + c.column);
  EXPECT_EQ(got, (std::vector<std::string>{"event id=id", "key=aggregateid", "payload=payload", "event type=type",
                                           "topic template reference=aggregatetype"}));
}

TEST(Mapping, ByteaPayloadIsRawBytes) {
  Mapping m({table()}, false);
  const auto& rel = relation(3000, "public", "outbox",
                             {{"id", kText}, {"aggregatetype", kText}, {"aggregateid", kText}, {"payload", kBytea}});
  const auto* rt = m.resolve(rel);
  ASSERT_NE(rt, nullptr);
  const auto rec = build_ok(*rt, tuple({"e1", "Blob", "k", "\\x00ff7f"}));
  EXPECT_EQ(rec.value, std::string("\x00\xff\x7f", 3));
  ASSERT_EQ(rec.headers.size(), 1U);  // no "type" column: the default role is skipped
  auto bad = rt->build(tuple({"e2", "Blob", "k", "\\x0g"}), kTxn);
  EXPECT_TRUE(std::holds_alternative<Poison>(bad));
}

TEST(Mapping, NullPayloadIsPoisonUnlessTombstonesAreConfigured) {
  Mapping poison_mapping({table()}, false);
  const auto nulled = tuple({"e1", "Order", "k", "t", std::nullopt});
  auto result = poison_mapping.resolve(debezium_outbox(4000))->build(nulled, kTxn);
  ASSERT_TRUE(std::holds_alternative<Poison>(result));
  EXPECT_EQ(std::get<Poison>(result).event_id, "e1");
  EXPECT_NE(std::get<Poison>(result).reason.find("NULL"), std::string::npos);

  auto t = table();
  t.null_payload = config::NullPayload::tombstone;
  Mapping tombstones({t}, false);
  const auto rec = build_ok(*tombstones.resolve(debezium_outbox(4001)), nulled);
  EXPECT_TRUE(rec.tombstone);
  EXPECT_EQ(rec.key, "k");
}

// format debezium-json: Debezium 3.6.1's bytes through JsonConverter for these columns (the
// run with the pinned jars is tests/debezium/formats_test.cpp).
config::TableConfig debezium_json(bool schemas) {
  auto t = table("djson");
  t.format.type = config::Format::debezium_json;
  t.format.schemas = schemas;
  t.null_payload = config::NullPayload::json_null;
  t.columns.type.reset();
  return t;
}

TEST(Mapping, DebeziumJsonTypesTheKeyAndThePayloadByTheirColumns) {
  const auto& rel = relation(9100, "public", "djson",
                             {{"id", kUuid}, {"aggregatetype", kText}, {"aggregateid", kInt8}, {"payload", kJsonb}});
  Mapping m({debezium_json(true)}, false, {}, [](pgoutput::Oid) {
    return std::vector<std::string>{"id", "aggregateid"};  // NOT NULL: the key's schema is not optional
  });
  const auto rec = build_ok(*m.resolve(rel), tuple({"e1", "Order", "42", R"({"n": 1, "s": "é\""})"}));
  EXPECT_EQ(rec.key, R"({"schema":{"type":"int64","optional":false},"payload":42})");
  EXPECT_EQ(
      rec.value,
      R"({"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"n\": 1, \"s\": \"é\\\"\"}"})");
  EXPECT_EQ(rec.headers.at(0).name, "id");
  EXPECT_EQ(rec.headers.at(0).value, "e1");  // SimpleHeaderConverter: the text
  // A NULL payload is the format's null, a NULL key is JSON null (never a record without a key).
  const auto nulls = build_ok(*m.resolve(rel), tuple({"e2", "Order", std::nullopt, std::nullopt}));
  EXPECT_FALSE(nulls.tombstone);
  EXPECT_EQ(nulls.key, R"({"schema":{"type":"int64","optional":false},"payload":null})");
  EXPECT_EQ(
      nulls.value,
      R"({"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":null})");
}

TEST(Mapping, DebeziumJsonWithoutSchemasWritesThePayloadAloneAndBytesAsBase64) {
  const auto& rel = relation(9101, "public", "djson",
                             {{"id", kUuid}, {"aggregatetype", kText}, {"aggregateid", kUuid}, {"payload", kBytea}});
  Mapping m({debezium_json(false)}, false);
  const auto rec =
      build_ok(*m.resolve(rel), tuple({"e1", "Order", "33333333-1111-1111-1111-111111111111", "\\x00ff10"}));
  EXPECT_EQ(rec.key, R"("33333333-1111-1111-1111-111111111111")");
  EXPECT_EQ(rec.value, R"("AP8Q")");
  EXPECT_EQ(build_ok(*m.resolve(rel), tuple({"e2", "Order", std::nullopt, std::nullopt})).value, "null");
}

TEST(Mapping, DebeziumJsonTombstonesABlankPayloadAsTheRouterDoes) {
  auto t = debezium_json(true);
  t.null_payload = config::NullPayload::tombstone;
  const auto& rel = relation(9102, "public", "djson",
                             {{"id", kUuid}, {"aggregatetype", kText}, {"aggregateid", kText}, {"payload", kText}});
  Mapping m({t}, false);
  for (const char* blank : {"", " \t\n"}) {
    const auto rec = build_ok(*m.resolve(rel), tuple({"e1", "Order", "k", blank}));
    EXPECT_TRUE(rec.tombstone) << "'" << blank << "'";
    EXPECT_EQ(rec.key, R"({"schema":{"type":"string","optional":true},"payload":"k"})");
  }
  EXPECT_FALSE(build_ok(*m.resolve(rel), tuple({"e2", "Order", "k", " x "})).tombstone);
}

TEST(Mapping, DebeziumJsonExpandsAnObjectAndMakesWhatStopsDebeziumPoison) {
  auto t = debezium_json(false);
  t.format.expand_json_payload = true;
  const auto& rel = relation(9103, "public", "djson",
                             {{"id", kUuid}, {"aggregatetype", kText}, {"aggregateid", kText}, {"payload", kJson}});
  Mapping m({t}, false);
  EXPECT_EQ(build_ok(*m.resolve(rel), tuple({"e1", "Order", "k", R"({"a": [1, 2], "b": null})"})).value,
            R"({"a":[1,2]})");
  EXPECT_EQ(build_ok(*m.resolve(rel), tuple({"e2", "Order", "k", R"("text")"})).value, R"("\"text\"")");
  auto big = m.resolve(rel)->build(tuple({"e3", "Order", "k", R"({"n": 12345678901234567890})"}), kTxn);
  ASSERT_TRUE(std::holds_alternative<Poison>(big));
  EXPECT_EQ(std::get<Poison>(big).code, "UNEXPANDABLE_PAYLOAD");
}

TEST(Mapping, DebeziumJsonRefusesAKeyTypeItDoesNotReproduce) {
  const auto& rel =
      relation(9104, "public", "djson",
               {{"id", kUuid}, {"aggregatetype", kText}, {"aggregateid", kTimestamptz}, {"payload", kJsonb}});
  Mapping m({debezium_json(true)}, false);
  try {
    m.resolve(rel);
    FAIL() << "resolved";
  } catch (const MappingError& e) {
    EXPECT_NE(std::string(e.what()).find("format debezium-json reproduces"), std::string::npos) << e.what();
  }
}

// CloudEvents' Kafka binding (docs/migrating.md "Record formats"); the SDK reads real records in
// tests/cloudevents.
config::TableConfig cloudevents_table(config::Format format) {
  auto t = table("cev");
  t.format.type = format;
  t.format.source = "/shop/public.cev";
  t.format.event_type = "com.example.${aggregatetype}.${type}";
  t.format.subject_from_key = true;
  t.columns.headers = "headers";
  return t;
}

const pgoutput::Relation& cloudevents_outbox(pgoutput::Oid relid, pgoutput::Oid payload) {
  return relation(relid, "public", "cev",
                  {{"id", kUuid},
                   {"aggregatetype", kText},
                   {"aggregateid", kText},
                   {"type", kText},
                   {"payload", payload},
                   {"headers", kJsonb}});
}

TEST(Mapping, CloudEventsBinaryModePutsTheAttributesInCeHeaders) {
  Mapping m({cloudevents_table(config::Format::cloudevents_binary)}, false);
  const auto rec =
      build_ok(*m.resolve(cloudevents_outbox(9200, kJsonb)),
               tuple({"e1", "order", "k1", "Created", R"({"n": 1})", R"({"traceparent": "00-ab-cd-01"})"}));
  std::map<std::string, std::string> h;
  for (const auto& header : rec.headers) h[header.name] = header.value;
  EXPECT_EQ(h["id"], "e1");
  EXPECT_EQ(h["ce_specversion"], "1.0");
  EXPECT_EQ(h["ce_id"], "e1");
  EXPECT_EQ(h["ce_source"], "/shop/public.cev");
  EXPECT_EQ(h["ce_type"], "com.example.order.Created");
  EXPECT_EQ(h["ce_time"], "2023-11-14T22:13:20.123Z");  // the commit time
  EXPECT_EQ(h["ce_subject"], "k1");
  EXPECT_EQ(h["ce_traceparent"], "00-ab-cd-01");
  EXPECT_EQ(h["content-type"], "application/json");
  EXPECT_EQ(rec.value, R"({"n": 1})");
  EXPECT_EQ(rec.key, "k1");
  auto untyped = m.resolve(cloudevents_outbox(9200, kJsonb))->build(tuple({"e2", "order", "k1", "", "{}", "{}"}), kTxn);
  ASSERT_TRUE(std::holds_alternative<Poison>(untyped));
  EXPECT_EQ(std::get<Poison>(untyped).code, "NULL_EVENT_TYPE");
}

TEST(Mapping, CloudEventsStructuredModeCarriesJsonAsDataAndBytesAsBase64) {
  Mapping m({cloudevents_table(config::Format::cloudevents_structured)}, false);
  const auto rec =
      build_ok(*m.resolve(cloudevents_outbox(9201, kText)), tuple({"e1", "order", "k1", "Created", R"([1, 2])", "{}"}));
  EXPECT_EQ(rec.value,
            R"({"specversion":"1.0","id":"e1","source":"/shop/public.cev","type":"com.example.order.Created",)"
            R"("time":"2023-11-14T22:13:20.123Z","subject":"k1","datacontenttype":"application/json","data":[1, 2]})");
  EXPECT_EQ(rec.headers.back().name, "content-type");
  EXPECT_EQ(rec.headers.back().value, "application/cloudevents+json");
  auto not_json =
      m.resolve(cloudevents_outbox(9201, kText))->build(tuple({"e2", "order", "k1", "Created", "plain", "{}"}), kTxn);
  ASSERT_TRUE(std::holds_alternative<Poison>(not_json));
  EXPECT_EQ(std::get<Poison>(not_json).code, "INVALID_JSON");
  const auto bytes = build_ok(*m.resolve(cloudevents_outbox(9202, kBytea)),
                              tuple({"e3", "order", "k1", "Created", "\\x00ff10", "{}"}));
  EXPECT_NE(bytes.value.find(R"("datacontenttype":"application/octet-stream","data_base64":"AP8Q"})"),
            std::string::npos)
      << bytes.value;
}

TEST(Mapping, NullIdOrRoutingValueIsPoisonAndNullKeyHasNoKey) {
  Mapping m({table()}, false);
  const auto* rt = m.resolve(debezium_outbox(5000));
  auto null_id = rt->build(tuple({std::nullopt, "Order", "k", "t", "{}"}), kTxn);
  ASSERT_TRUE(std::holds_alternative<Poison>(null_id));
  EXPECT_EQ(std::get<Poison>(null_id).code, "NULL_ID");
  EXPECT_EQ(std::get<Poison>(null_id).record.value, "{}");
  auto null_route = rt->build(tuple({"e", std::nullopt, "k", "t", "{}"}), kTxn);
  ASSERT_TRUE(std::holds_alternative<Poison>(null_route));
  EXPECT_EQ(std::get<Poison>(null_route).code, "NULL_ROUTING_VALUE");
  EXPECT_TRUE(std::get<Poison>(null_route).record.topic.empty());
  const auto rec = build_ok(*rt, tuple({"e", "Order", std::nullopt, std::nullopt, "{}"}));
  EXPECT_FALSE(rec.key);
  EXPECT_EQ(rec.headers.size(), 1U);  // NULL type: no header
}

TEST(Mapping, ValidateJsonMakesATextPayloadThatIsNotJsonPoisonKeepingWhatWasBuilt) {
  auto t = table();
  t.validate_json = true;
  Mapping m({t}, false);
  const auto& rel =
      relation(6500, "public", "outbox",
               {{"id", kText}, {"aggregatetype", kText}, {"aggregateid", kText}, {"type", kText}, {"payload", kText}});
  const auto* rt = m.resolve(rel);
  ASSERT_NE(rt, nullptr);
  build_ok(*rt, tuple({"e1", "Order", "k1", "Created", R"({"a": [1, 2, "x"]})"}));
  auto result = rt->build(tuple({"e2", "Order", "k2", "Created", "{not json"}), kTxn);
  ASSERT_TRUE(std::holds_alternative<Poison>(result));
  const auto& poison = std::get<Poison>(result);
  EXPECT_EQ(poison.code, "INVALID_JSON");
  EXPECT_EQ(poison.event_id, "e2");
  EXPECT_EQ(poison.record.topic, "outbox.event.Order");
  EXPECT_EQ(poison.record.key, "k2");
  EXPECT_EQ(poison.record.value, "{not json");
  ASSERT_EQ(poison.record.headers.size(), 2U);
  EXPECT_EQ(poison.record.headers[1].value, "Created");

  // Off (the default), the same text is relayed as it is.
  Mapping lenient({table()}, false);
  const auto& rel2 = relation(6501, "public", "outbox",
                              {{"id", kText}, {"aggregatetype", kText}, {"aggregateid", kText}, {"payload", kText}});
  EXPECT_EQ(build_ok(*lenient.resolve(rel2), tuple({"e3", "Order", "k", "{not json"})).value, "{not json");
}

TEST(Mapping, MalformedHeadersObjectIsPoison) {
  auto t = table();
  t.columns.headers = "meta";
  Mapping m({t}, false);
  const auto& rel =
      relation(6000, "public", "outbox",
               {{"id", kText}, {"aggregatetype", kText}, {"aggregateid", kText}, {"payload", kText}, {"meta", kJson}});
  const auto* rt = m.resolve(rel);
  EXPECT_TRUE(std::holds_alternative<Poison>(rt->build(tuple({"e", "A", "k", "p", "[1, 2]"}), kTxn)));
  EXPECT_TRUE(std::holds_alternative<Poison>(rt->build(tuple({"e", "A", "k", "p", "{oops"}), kTxn)));
  EXPECT_TRUE(std::holds_alternative<Record>(rt->build(tuple({"e", "A", "k", "p", std::nullopt}), kTxn)));
}

TEST(Mapping, MissingColumnsAndWrongTypesNameTableAndColumn) {
  auto t = table();
  t.columns.payload = "body";
  Mapping m({t}, false);
  try {
    m.resolve(debezium_outbox(7000));
    FAIL() << "resolved without the payload column";
  } catch (const MappingError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("public.outbox"), std::string::npos) << what;
    EXPECT_NE(what.find("\"body\""), std::string::npos) << what;
    EXPECT_NE(what.find("payload"), std::string::npos) << what;
  }
  // It keeps failing: a table that cannot be mapped never turns into "not configured".
  EXPECT_THROW(m.resolve(*cache.find(7000)), MappingError);

  Mapping typed({table()}, false);
  const auto& bad = relation(7001, "public", "outbox",
                             {{"id", kText}, {"aggregatetype", kText}, {"aggregateid", kText}, {"payload", kInt8}});
  try {
    typed.resolve(bad);
    FAIL() << "bigint payload accepted";
  } catch (const MappingError& e) {
    EXPECT_NE(std::string(e.what()).find("json, jsonb, text"), std::string::npos) << e.what();
  }

  auto explicit_type = table();
  explicit_type.columns.type = "event_type";
  explicit_type.type_column_explicit = true;
  Mapping named({explicit_type}, false);
  EXPECT_THROW(named.resolve(debezium_outbox(7002)), MappingError);

  auto bad_template = table();
  bad_template.topic = "events.${region}";
  Mapping templated({bad_template}, false);
  try {
    templated.resolve(debezium_outbox(7003));
    FAIL();
  } catch (const MappingError& e) {
    EXPECT_NE(std::string(e.what()).find("\"region\""), std::string::npos) << e.what();
  }
}

TEST(Mapping, OtherTablesAreNotMappedAndANewRelationIsResolvedAgain) {
  Mapping m({table()}, false);
  EXPECT_EQ(m.resolve(relation(8000, "public", "orders", {{"id", kInt8}})), nullptr);
  const auto* first = m.resolve(debezium_outbox(8001));
  ASSERT_NE(first, nullptr);
  const auto gen = first->relation_generation();
  // ALTER TABLE … ADD COLUMN: a new Relation message for the same relid.
  const auto& altered = relation(8001, "public", "outbox",
                                 {{"id", kUuid},
                                  {"aggregatetype", kText},
                                  {"aggregateid", kText},
                                  {"type", kText},
                                  {"payload", kJsonb},
                                  {"extra", kText}});
  const auto* second = m.resolve(altered);
  ASSERT_NE(second, nullptr);
  EXPECT_GT(second->relation_generation(), gen);
  const auto rec = build_ok(*second, tuple({"e", "A", "k", "t", "{}", "x"}));
  EXPECT_EQ(rec.value, "{}");
  // A rename away from the configured name: no longer mapped.
  EXPECT_EQ(m.resolve(relation(8001, "public", "outbox_old", {{"id", kUuid}})), nullptr);
}

// Ancestry as the catalog would answer it, by OID; an OID absent here was dropped.
struct FakeCatalog {
  std::map<pgoutput::Oid, Ancestors> known;
  int lookups = 0;
  AncestryLookup lookup() {
    return [this](pgoutput::Oid relid) -> std::optional<Ancestors> {
      ++lookups;
      const auto it = known.find(relid);
      if (it == known.end()) return std::nullopt;
      return it->second;
    };
  }
};

TEST(MappingFamily, ALeafPartitionIsMappedWithItsRootsMappingByColumnName) {
  FakeCatalog catalog;
  catalog.known[9001] = {{"public", "outbox_2026"}, {"public", "outbox"}};  // a sub-partition
  Mapping m({table()}, false, catalog.lookup());
  // Columns in another order than the root's, as a partition created apart and attached.
  const auto& leaf =
      relation(9001, "public", "outbox_2026_05",
               {{"payload", kJsonb}, {"aggregateid", kText}, {"id", kUuid}, {"type", kText}, {"aggregatetype", kText}});
  const auto* rt = m.resolve(leaf);
  ASSERT_NE(rt, nullptr);
  const auto rec = build_ok(*rt, tuple({R"({"n": 1})", "order-7", "e-1", "OrderCreated", "Order"}));
  EXPECT_EQ(rec.topic, "outbox.event.Order");
  EXPECT_EQ(rec.key, "order-7");
  EXPECT_EQ(rec.value, R"({"n": 1})");
  EXPECT_EQ(rec.event_id, "e-1");
  EXPECT_EQ(m.resolve(leaf), rt);
  EXPECT_EQ(catalog.lookups, 1) << "ancestry is cached per OID";
}

TEST(MappingFamily, AnInheritanceChildWithExtraColumnsUsesTheNearestConfiguredAncestor) {
  FakeCatalog catalog;
  catalog.known[9101] = {{"public", "outbox"}};
  catalog.known[9102] = {{"shop", "events"}, {"public", "outbox"}};  // nearest configured wins
  auto custom = table("events");
  custom.schema = "shop";
  custom.topic = "shop.${aggregatetype}";
  Mapping m({table(), custom}, false, catalog.lookup());
  const auto* child = m.resolve(relation(9101, "public", "outbox_2026",
                                         {{"id", kUuid},
                                          {"aggregatetype", kText},
                                          {"aggregateid", kText},
                                          {"type", kText},
                                          {"payload", kJsonb},
                                          {"archived", kText}}));
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(build_ok(*child, tuple({"e", "A", "k", "t", "{}", "x"})).topic, "outbox.event.A");
  const auto* grandchild = m.resolve(relation(
      9102, "shop", "events_old",
      {{"id", kUuid}, {"aggregatetype", kText}, {"aggregateid", kText}, {"type", kText}, {"payload", kJsonb}}));
  ASSERT_NE(grandchild, nullptr);
  EXPECT_EQ(build_ok(*grandchild, tuple({"e", "B", "k", "t", "{}"})).topic, "shop.B");
}

TEST(MappingFamily, RelationsOutsideEveryFamilyStayIgnored) {
  FakeCatalog catalog;
  catalog.known[9201] = {};                        // a plain table
  catalog.known[9202] = {{"public", "invoices"}};  // a partition of something else
  Mapping m({table()}, false, catalog.lookup());
  EXPECT_EQ(m.resolve(relation(9201, "public", "orders", {{"id", kInt8}})), nullptr);
  EXPECT_EQ(m.resolve(debezium_outbox_named(9202, "invoices_2026")), nullptr);
}

TEST(MappingFamily, AnUnmappableMemberStopsNamingTableRelationAndFix) {
  FakeCatalog catalog;
  catalog.known[9301] = {{"public", "outbox"}};
  Mapping m({table()}, false, catalog.lookup());
  // A publication column list that leaves out the payload of one child.
  const auto& child =
      relation(9301, "public", "outbox_legacy", {{"id", kUuid}, {"aggregatetype", kText}, {"aggregateid", kText}});
  try {
    m.resolve(child);
    FAIL() << "an unmappable family member was ignored";
  } catch (const MappingError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("public.outbox_legacy"), std::string::npos) << what;
    EXPECT_NE(what.find("outbox table public.outbox"), std::string::npos) << what;
    EXPECT_NE(what.find("\"payload\""), std::string::npos) << what;
    EXPECT_NE(what.find("Fix:"), std::string::npos) << what;
  }
  EXPECT_THROW(m.resolve(child), MappingError) << "it must keep failing, never fall back to ignored";
}

TEST(MappingFamily, ADroppedRelationThatCouldBeAMemberStopsOneThatCannotIsIgnored) {
  FakeCatalog catalog;  // knows no OID: every relation below was dropped since
  Mapping m({table()}, false, catalog.lookup());
  try {
    m.resolve(debezium_outbox_named(9401, "outbox_2025_12"));
    FAIL() << "rows of a dropped relation with the outbox's columns were ignored";
  } catch (const MappingError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("public.outbox_2025_12 (oid 9401) no longer exists, or is no longer in the publication"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("pg_replication_slot_advance"), std::string::npos) << what;
  }
  // Lacking the outbox's columns, it cannot have been a partition or child of it.
  EXPECT_EQ(m.resolve(relation(9402, "public", "staging", {{"id", kInt8}, {"note", kText}})), nullptr);
}

TEST(MappingFamily, ANewDescriptionLooksTheAncestryUpAgain) {
  FakeCatalog catalog;
  catalog.known[9501] = {};
  Mapping m({table()}, false, catalog.lookup());
  EXPECT_EQ(m.resolve(debezium_outbox_named(9501, "outbox_next")), nullptr);
  catalog.known[9501] = {{"public", "outbox"}};  // ALTER TABLE outbox ATTACH PARTITION outbox_next …
  EXPECT_NE(m.resolve(debezium_outbox_named(9501, "outbox_next")), nullptr);
  EXPECT_EQ(catalog.lookups, 2);
}

// Issue 19 (SECURITY.md "Row values"): a routing value that makes a topic Kafka refuses, or one
// outside the table's allow-list, is poison INVALID_TOPIC with no topic left on the record.
TEST(Mapping, InvalidOrDisallowedTopicIsPoisonWithoutATopic) {
  auto t = table();
  t.topic = "x.${aggregatetype}";
  Mapping m({t}, false);
  const auto* rt = m.resolve(debezium_outbox(7000));
  for (const std::string_view bad : {"a/1", "a b", "a\nb", "\xc3\xa9"}) {
    auto result = rt->build(tuple({"e", bad, "k", "Created", "{}"}), kTxn);
    ASSERT_TRUE(std::holds_alternative<Poison>(result)) << bad;
    const auto& poison = std::get<Poison>(result);
    EXPECT_EQ(poison.code, "INVALID_TOPIC");
    EXPECT_TRUE(poison.record.topic.empty());
    EXPECT_EQ(poison.reason.find('\n'), std::string::npos) << "the reason quotes the value escaped";
  }
  const std::string long_value(260, 'a');
  EXPECT_EQ(std::get<Poison>(rt->build(tuple({"e", long_value, "k", "Created", "{}"}), kTxn)).code, "INVALID_TOPIC");
  EXPECT_EQ(build_ok(*rt, tuple({"e", "Order-1_x.y", "k", "Created", "{}"})).topic, "x.Order-1_x.y");

  auto allow = table();
  allow.topic = "${aggregatetype}";
  allow.topic_pattern = "orders\\.[a-z]+";
  Mapping allowed({allow}, false);
  const auto* ra = allowed.resolve(debezium_outbox(7001));
  EXPECT_EQ(build_ok(*ra, tuple({"e", "orders.created", "k", "Created", "{}"})).topic, "orders.created");
  EXPECT_EQ(std::get<Poison>(ra->build(tuple({"e", "payments.created", "k", "Created", "{}"}), kTxn)).code,
            "INVALID_TOPIC");
  EXPECT_EQ(std::get<Poison>(ra->build(tuple({"e", ".", "k", "Created", "{}"}), kTxn)).code, "INVALID_TOPIC");
}

// The headers column cannot set id, type or pgoutbox.*: those keys are dropped and counted.
TEST(Mapping, ReservedHeaderNamesFromTheColumnAreDroppedAndCounted) {
  auto t = table("spoof_outbox");
  t.columns.headers = "meta";
  Mapping m({t}, true);
  const auto& rel = relation(7100, "public", "spoof_outbox",
                             {{"id", kText},
                              {"aggregatetype", kText},
                              {"aggregateid", kText},
                              {"type", kText},
                              {"payload", kText},
                              {"meta", kJsonb}});
  const auto* rt = m.resolve(rel);
  const auto rec = build_ok(
      *rt,
      tuple(
          {"real-id", "A", "k", "Created", "p",
           R"({"id": "SPOOFED", "ID": "x", "Type": "t", "pgoutbox.lsn": "0/0", "PGOUTBOX.xid": "1", "traceparent": "00-ab"})"}));
  std::vector<std::string> names;
  for (const auto& h : rec.headers) names.push_back(h.name);
  EXPECT_EQ(names, (std::vector<std::string>{"id", "type", "traceparent", "pgoutbox.lsn", "pgoutbox.commit_time_us",
                                             "pgoutbox.xid"}));
  EXPECT_EQ(rec.headers[0].value, "real-id");
  std::uint64_t counted = 0;
  for (const auto& [name, count] : dropped_header_counts()) {
    if (name == "public.spoof_outbox") counted = count;
  }
  EXPECT_EQ(counted, 5U);
}

// More headers (or header bytes) than the cap is poison, and the poison record keeps none of them.
TEST(Mapping, HeadersOverTheCapArePoison) {
  auto t = table();
  t.columns.headers = "meta";
  Mapping m({t}, false);
  const auto& rel =
      relation(7200, "public", "outbox",
               {{"id", kText}, {"aggregatetype", kText}, {"aggregateid", kText}, {"payload", kText}, {"meta", kJsonb}});
  const auto* rt = m.resolve(rel);
  const auto object_with = [](std::size_t keys, std::size_t value_bytes) {
    std::string json = "{";
    for (std::size_t i = 0; i < keys; ++i)
      json += (i ? ",\"h" : "\"h") + std::to_string(i) + "\":\"" + std::string(value_bytes, 'v') + "\"";
    return json + "}";
  };
  EXPECT_EQ(build_ok(*rt, tuple({"e", "A", "k", "p", object_with(kMaxColumnHeaders, 10)})).headers.size(),
            kMaxColumnHeaders + 1);
  const auto many = object_with(kMaxColumnHeaders + 1, 10);
  auto result = rt->build(tuple({"e", "A", "k", "p", many}), kTxn);
  ASSERT_TRUE(std::holds_alternative<Poison>(result));
  EXPECT_EQ(std::get<Poison>(result).code, "TOO_MANY_HEADERS");
  EXPECT_EQ(std::get<Poison>(result).record.headers.size(), 1U) << "only pgoutbox's own id header";
  const auto big = object_with(2, kMaxColumnHeaderBytes / 2);
  EXPECT_EQ(std::get<Poison>(rt->build(tuple({"e", "A", "k", "p", big}), kTxn)).code, "TOO_MANY_HEADERS");
}

// A `json` column keeps "\u0000" (jsonb refuses it): a name with a NUL is dropped and counted
// like a reserved one (a C-string reader sees "id"), a string value with one makes the row
// poison (SECURITY.md "Row values").
TEST(Mapping, HeaderNamesWithANulAreDroppedAndValuesWithOneArePoison) {
  auto t = table("nul_outbox");
  t.columns.headers = "meta";
  Mapping m({t}, false);
  const auto& rel =
      relation(7300, "public", "nul_outbox",
               {{"id", kText}, {"aggregatetype", kText}, {"aggregateid", kText}, {"payload", kText}, {"meta", kJson}});
  const auto* rt = m.resolve(rel);
  const auto rec = build_ok(
      *rt,
      tuple({"real-id", "A", "k", "p",
             R"({"id\u0000": "SPOOFED", "traceparent\u0000x": "t", "n\u0000": 1, "ok": "v", "arr": ["\u0000"]})"}));
  std::vector<std::string> names;
  for (const auto& h : rec.headers) names.push_back(h.name);
  EXPECT_EQ(names, (std::vector<std::string>{"id", "ok", "arr"}));
  EXPECT_EQ(rec.headers[0].value, "real-id");
  EXPECT_EQ(rec.headers[2].value, R"(["\u0000"])") << "a value that is not a string keeps its JSON escape";
  std::uint64_t counted = 0;
  for (const auto& [name, count] : dropped_header_counts()) {
    if (name == "public.nul_outbox") counted = count;
  }
  EXPECT_EQ(counted, 3U);

  auto result = rt->build(tuple({"e", "A", "k", "p", R"({"a": "1", "tenant": "acme\u0000other", "b": "2"})"}), kTxn);
  ASSERT_TRUE(std::holds_alternative<Poison>(result));
  const auto& poison = std::get<Poison>(result);
  EXPECT_EQ(poison.code, "INVALID_HEADERS");
  EXPECT_NE(poison.reason.find("tenant"), std::string::npos) << poison.reason;
  for (const auto& h : poison.record.headers) {
    EXPECT_EQ(h.value.find('\0'), std::string::npos) << "the dead-letter copy carries no NUL either: " << h.name;
  }
  EXPECT_EQ(poison.record.headers.size(), 3U) << "id, a and b";
}

// The column's JSON text is capped before it is parsed (the parser would take ~13 bytes per
// byte and keep them): above the cap it is poison whatever it holds, below it any headers
// within the decoded caps fit, however escaped.
TEST(Mapping, HeadersTextOverItsCapIsPoisonWithoutBeingParsed) {
  auto t = table("big_outbox");
  t.columns.headers = "meta";
  Mapping m({t}, false);
  const auto& rel =
      relation(7400, "public", "big_outbox",
               {{"id", kText}, {"aggregatetype", kText}, {"aggregateid", kText}, {"payload", kText}, {"meta", kJson}});
  const auto* rt = m.resolve(rel);
  // Two small headers and whitespace: valid JSON a `json` column keeps as written.
  const std::string padded = R"({"a": "1",)" + std::string(kMaxColumnHeadersTextBytes, ' ') + R"("b": "2"})";
  auto result = rt->build(tuple({"e", "A", "k", "p", padded}), kTxn);
  ASSERT_TRUE(std::holds_alternative<Poison>(result));
  EXPECT_EQ(std::get<Poison>(result).code, "TOO_MANY_HEADERS");
  EXPECT_NE(std::get<Poison>(result).reason.find("not read"), std::string::npos) << std::get<Poison>(result).reason;
  EXPECT_EQ(std::get<Poison>(result).record.headers.size(), 1U) << "only pgoutbox's own id header";
  EXPECT_EQ(std::get<Poison>(result).record.value, "p") << "the rest of the row is kept for the dead-letter copy";

  // 64 headers of 1,000 control characters each, all escaped: 64,000 bytes, 6 bytes of text each.
  std::string escaped = "{";
  for (std::size_t i = 0; i < kMaxColumnHeaders; ++i) {
    escaped += (i ? ",\"h" : "\"h") + std::to_string(i) + "\": \"";
    for (int c = 0; c < 1000; ++c) escaped += "\\u0001";
    escaped += "\"";
  }
  escaped += "}";
  ASSERT_GT(escaped.size(), 6U * kMaxColumnHeaders * 1000);
  EXPECT_EQ(build_ok(*rt, tuple({"e", "A", "k", "p", escaped})).headers.size(), kMaxColumnHeaders + 1);
}

TEST(Mapping, ByteaHexAndTimestampParsers) {
  EXPECT_EQ(decode_bytea_hex("\\x"), "");
  EXPECT_EQ(decode_bytea_hex("\\xDEADbeef"), std::string("\xde\xad\xbe\xef", 4));
  EXPECT_FALSE(decode_bytea_hex("\\x0"));
  EXPECT_FALSE(decode_bytea_hex("0x00"));
  EXPECT_FALSE(decode_bytea_hex("\\001"));  // escape format is not what the session asks for

  EXPECT_EQ(parse_pg_timestamp_ms("1970-01-01 00:00:00+00"), 0);
  EXPECT_EQ(parse_pg_timestamp_ms("1970-01-01 00:00:01.5"), 1500);
  EXPECT_EQ(parse_pg_timestamp_ms("2026-11-29 10:00:00.123456+02"), 1'795'939'200'123);
  EXPECT_EQ(parse_pg_timestamp_ms("2026-11-29 08:00:00+05:30"), 1'795'939'200'000 - 19'800'000);
  EXPECT_FALSE(parse_pg_timestamp_ms("infinity"));
  EXPECT_FALSE(parse_pg_timestamp_ms("2026-02-30 00:00:00+00"));
  EXPECT_FALSE(parse_pg_timestamp_ms("2026-11-29T08:00:00Z"));
  EXPECT_FALSE(parse_pg_timestamp_ms("2026-11-29 08:00:00+00 BC"));
}

}  // namespace
}  // namespace pgoutbox::outbox
