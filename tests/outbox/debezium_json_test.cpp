// format debezium-json's encoders against bytes Debezium 3.6.1 wrote through JsonConverter
// (captured from a run of the pinned jars; the end-to-end comparison is
// tests/debezium/formats_test.cpp).
#include "pgoutbox/outbox/debezium_json.h"

#include <gtest/gtest.h>

#include <string>

namespace pgoutbox::outbox::debezium {
namespace {

struct SchemaAndPayload {
  std::string schema;
  std::string payload;
};

// The expanded value without schemas is the payload; with them, the same payload enveloped.
SchemaAndPayload expanded(std::string_view json, std::string_view field = "payload") {
  auto bare = expand(json, field, false);
  auto enveloped = expand(json, field, true);
  const auto* b = std::get_if<Expanded>(&bare);
  const auto* e = std::get_if<Expanded>(&enveloped);
  if (b == nullptr || e == nullptr) {
    ADD_FAILURE() << "not expanded: " << json;
    return {};
  }
  const std::string head = R"({"schema":)";
  const std::string tail = R"(,"payload":)" + b->value + "}";
  if (!e->value.starts_with(head) || !e->value.ends_with(tail) || e->value.size() < head.size() + tail.size()) {
    ADD_FAILURE() << "not an envelope of the payload: " << e->value;
    return {};
  }
  return {e->value.substr(head.size(), e->value.size() - head.size() - tail.size()), b->value};
}

TEST(DebeziumJson, SchemasAreWrittenAsJsonConverterWritesThem) {
  EXPECT_EQ(schema_json({"string", false, "", 0}), R"({"type":"string","optional":false})");
  EXPECT_EQ(schema_json({"string", false, "io.debezium.data.Uuid", 1}),
            R"({"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1})");
  EXPECT_EQ(envelope(true, schema_json({"int64", false, "", 0}), "42"),
            R"({"schema":{"type":"int64","optional":false},"payload":42})");
  EXPECT_EQ(envelope(false, "ignored", "42"), "42");
  EXPECT_EQ(string_envelope(true, R"({"type":"string","optional":true})", "a\"b"),
            R"({"schema":{"type":"string","optional":true},"payload":"a\"b"})");
  EXPECT_EQ(string_envelope(false, "ignored", "é\n"), R"("é\n")");
}

TEST(DebeziumJson, StringsAreQuotedAsJacksonQuotesThem) {
  EXPECT_EQ(json_string("plain text \"quoted\" \\ back"), R"("plain text \"quoted\" \\ back")");
  EXPECT_EQ(json_string("héllo ✓ /"), "\"héllo ✓ /\"");
  EXPECT_EQ(json_string(std::string("a\b\t\n\f\r\x01\x1f\x7f", 9)), "\"a\\b\\t\\n\\f\\r\\u0001\\u001F\x7f\"");
  EXPECT_EQ(json_string(""), "\"\"");
  // Debezium 3.6.1 wrote 😀 (U+1F600) as its surrogate pair.
  EXPECT_EQ(json_string("✓ 😀"), "\"✓ \\uD83D\\uDE00\"");
}

TEST(DebeziumJson, BytesAreBase64) {
  EXPECT_EQ(base64(std::string("\x00\xff\x10", 3)), "AP8Q");
  EXPECT_EQ(base64(""), "");
  EXPECT_EQ(base64("a"), "YQ==");
  EXPECT_EQ(base64("ab"), "YWI=");
  EXPECT_EQ(base64("abc"), "YWJj");
}

TEST(DebeziumJson, DoublesAreWrittenAsJavasDoubleToString) {
  EXPECT_EQ(java_double(1.5), "1.5");
  EXPECT_EQ(java_double(100), "100.0");
  EXPECT_EQ(java_double(2.25), "2.25");
  EXPECT_EQ(java_double(0.001), "0.001");
  EXPECT_EQ(java_double(0.0001), "1.0E-4");
  EXPECT_EQ(java_double(1e7), "1.0E7");
  EXPECT_EQ(java_double(9999999.5), "9999999.5");
  EXPECT_EQ(java_double(1.25e10), "1.25E10");
  EXPECT_EQ(java_double(-0.5), "-0.5");
  EXPECT_EQ(java_double(0), "0.0");
  EXPECT_EQ(java_double(-0.0), "-0.0");
  EXPECT_EQ(java_double(0.1), "0.1");
  EXPECT_EQ(java_double(123456.789), "123456.789");
}

// Debezium 3.6.1's bytes for this jsonb payload with table.expand.json.payload=true.
TEST(DebeziumJson, AnObjectIsExpandedWithTheSchemaDebeziumInfers) {
  const auto e =
      expanded(R"({"b": true, "f": 1.5, "n": 1, "arr": [1, 2, 3], "nul": null, "obj": {"x": "y"}, "note": "héllo ✓"})");
  EXPECT_EQ(
      e.schema,
      R"({"type":"struct","fields":[{"type":"boolean","optional":true,"field":"b"},{"type":"double","optional":true,"field":"f"},{"type":"int32","optional":true,"field":"n"},{"type":"array","items":{"type":"int32","optional":true},"optional":true,"field":"arr"},{"type":"struct","fields":[{"type":"string","optional":true,"field":"x"}],"optional":true,"name":"payload.obj","field":"obj"},{"type":"string","optional":true,"field":"note"}],"optional":true,"name":"payload"})");
  EXPECT_EQ(e.payload, R"({"b":true,"f":1.5,"n":1,"arr":[1,2,3],"obj":{"x":"y"},"note":"héllo ✓"})");
  const auto empty = expanded("{}");
  EXPECT_EQ(empty.schema, R"({"type":"struct","fields":[],"optional":true,"name":"payload"})");
  EXPECT_EQ(empty.payload, "{}");
}

// A merged struct is not optional (Connect's SchemaUtil.copySchemaBasics leaves that out); the
// objects' one schema, when they share it, stays optional.
TEST(DebeziumJson, ObjectsInAnArrayShareOneMergedSchemaAndAMissingFieldIsNull) {
  const auto e = expanded(R"({"items": [{"a": 1}, {"a": 2, "b": "x"}], "big": 3000000000, "e": []})");
  EXPECT_EQ(
      e.schema,
      R"({"type":"struct","fields":[{"type":"array","items":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"a"},{"type":"string","optional":true,"field":"b"}],"optional":false,"name":"payload.items"},"optional":true,"field":"items"},{"type":"int64","optional":true,"field":"big"}],"optional":true,"name":"payload"})");
  EXPECT_EQ(e.payload, R"({"items":[{"a":1,"b":null},{"a":2,"b":"x"}],"big":3000000000})");
  const auto same = expanded(R"({"items": [{"a": 1}, {"a": 2}]})");
  EXPECT_NE(same.schema.find(R"("optional":true,"name":"payload.items")"), std::string::npos) << same.schema;
}

TEST(DebeziumJson, ARepeatedNameKeepsItsFirstPlaceAndItsLastValue) {
  const auto e = expanded(R"({"a": 1, "b": 2, "a": "last"})");
  EXPECT_EQ(e.payload, R"({"a":"last","b":2})");
}

// The schema is inferred once per shape (field names in order, types, number kinds): a document
// differing in any of them, or in another column, gets its own.
TEST(DebeziumJson, DocumentsOfOneShapeShareASchemaAndAnyDifferenceInfersAnother) {
  const auto small = expanded(R"({"n": 1, "s": "x", "o": {"t": true}})");
  EXPECT_EQ(expanded(R"({"n": 2, "s": "y", "o": {"t": false}})").schema, small.schema);
  const auto large = expanded(R"({"n": 3000000000, "s": "x", "o": {"t": true}})");
  EXPECT_NE(large.schema.find(R"({"type":"int64","optional":true,"field":"n"})"), std::string::npos) << large.schema;
  EXPECT_EQ(large.payload, R"({"n":3000000000,"s":"x","o":{"t":true}})");
  const auto renamed = expanded(R"({"n": 1, "s": "x", "o": {"u": true}})");
  EXPECT_NE(renamed.schema.find(R"("field":"u")"), std::string::npos) << renamed.schema;
  const auto nulled = expanded(R"({"n": 1, "s": null, "o": {"t": true}})");
  EXPECT_EQ(nulled.schema.find(R"("field":"s")"), std::string::npos) << nulled.schema;
  EXPECT_EQ(nulled.payload, R"({"n":1,"o":{"t":true}})");
  const auto reordered = expanded(R"({"s": "x", "n": 1, "o": {"t": true}})");
  EXPECT_LT(reordered.schema.find(R"("field":"s")"), reordered.schema.find(R"("field":"n")")) << reordered.schema;
  const auto other_column = expanded(R"({"n": 1, "s": "x", "o": {"t": true}})", "body");
  EXPECT_NE(other_column.schema.find(R"("name":"body.o")"), std::string::npos) << other_column.schema;
  // The same shape again after the others still has its own schema.
  EXPECT_EQ(expanded(R"({"n": 7, "s": "z", "o": {"t": true}})").schema, small.schema);
  // A document too large to be kept (over 8 KiB) is expanded all the same, each time.
  std::string large_document = "{";
  for (int i = 0; i < 700; ++i)
    large_document += (i > 0 ? ", \"f" : "\"f") + std::to_string(i) + "\": " + std::to_string(i);
  large_document += "}";
  ASSERT_GT(large_document.size(), 8U * 1024);
  for (int round = 0; round < 2; ++round) {
    const auto e = expanded(large_document);
    EXPECT_NE(e.schema.find(R"({"type":"int32","optional":true,"field":"f699"})"), std::string::npos);
    EXPECT_TRUE(e.payload.starts_with(R"({"f0":0,"f1":1,)")) << e.payload.substr(0, 40);
    EXPECT_TRUE(e.payload.ends_with(R"("f699":699})")) << e.payload.substr(e.payload.size() - 40);
  }
}

TEST(DebeziumJson, WhatTheRouterCannotExpandStaysAString) {
  for (const auto* json : {R"("just a string")", R"( {"a": 1})", R"({"a": [1, "x"]})", R"({"a": [1, 2.5]})",
                           R"({"a": [null]})", R"([1, "a", {"k": 2}])", "{not json"}) {
    EXPECT_TRUE(std::holds_alternative<KeptAsString>(expand(json, "payload", true))) << json;
  }
}

TEST(DebeziumJson, WhatStopsDebeziumsTaskIsUnpublishable) {
  for (const auto* json : {R"({"big": 12345678901234567890})", R"([1, 2, 3])", R"([])",
                           R"({"a": [{"x": 1}, {"x": "s"}]})", R"({"a": [[1], ["s"]]})"}) {
    EXPECT_TRUE(std::holds_alternative<Unpublishable>(expand(json, "payload", true))) << json;
  }
}

TEST(DebeziumJson, AnEnvelopeIsDecodedFieldByFieldWithStructsNamedByTheirPath) {
  const auto decoded = decode_envelope(
      R"({"id": 7, "aggregateid": "k", "gone": null, "payload": {"n": 1.5, "c": {"x": true}}, "e": [], "s": "é"})");
  ASSERT_TRUE(std::holds_alternative<std::vector<DecodedField>>(decoded));
  const auto& fields = std::get<std::vector<DecodedField>>(decoded);
  ASSERT_EQ(fields.size(), 4U);  // the null and the empty array are left out
  EXPECT_EQ(fields[0].name, "id");
  EXPECT_EQ(fields[0].schema, R"({"type":"int32","optional":true})");
  EXPECT_EQ(fields[0].value, "7");
  EXPECT_FALSE(fields[0].text);
  EXPECT_EQ(fields[1].schema, R"({"type":"string","optional":true})");
  EXPECT_EQ(fields[1].value, R"("k")");
  EXPECT_EQ(fields[1].text, std::optional<std::string>("k"));
  EXPECT_EQ(fields[2].name, "payload");
  EXPECT_EQ(fields[2].schema,
            R"({"type":"struct","fields":[{"type":"double","optional":true,"field":"n"},{"type":"struct","fields":[)"
            R"({"type":"boolean","optional":true,"field":"x"}],"optional":true,"name":"payload.c","field":"c"}],)"
            R"("optional":true,"name":"payload"})");
  EXPECT_EQ(fields[2].value, R"({"n":1.5,"c":{"x":true}})");
  EXPECT_EQ(fields[3].value, R"("é")");
}

TEST(DebeziumJson, AnEnvelopeDebeziumCannotDecodeIsUnpublishable) {
  for (const auto* json :
       {R"( {"a": 1})", R"([{"a": 1}])", R"({"a": [1, "x"]})", R"({"big": 12345678901234567890})", "{not json"}) {
    EXPECT_TRUE(std::holds_alternative<Unpublishable>(decode_envelope(json))) << json;
  }
}

}  // namespace
}  // namespace pgoutbox::outbox::debezium
