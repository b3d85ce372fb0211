#include "pgoutbox/outbox/envelope.h"

#include <gtest/gtest.h>

#include <map>

namespace pgoutbox::outbox {
namespace {

config::MessageConfig outbox_prefix() {
  config::MessageConfig m;
  m.prefix = "outbox";
  return m;
}

const TxnContext kTxn{Lsn{0x1234}, 1'700'000'000'000'000, 42};

std::map<std::string, std::string> headers_of(const Record& r) {
  std::map<std::string, std::string> out;
  for (const auto& h : r.headers) out[h.name] = h.value;
  return out;
}

Record record_of(const MessageMapping& mapping, std::string_view envelope) {
  auto built = mapping.build(0, envelope, kTxn);
  if (auto* poison = std::get_if<Poison>(&built)) {
    ADD_FAILURE() << poison->code << ": " << poison->reason;
    return {};
  }
  return std::get<Record>(built);
}

Poison poison_of(const MessageMapping& mapping, std::string_view envelope) {
  auto built = mapping.build(0, envelope, kTxn);
  if (auto* record = std::get_if<Record>(&built)) {
    ADD_FAILURE() << "expected poison, got a record for topic " << record->topic;
    return {};
  }
  return std::get<Poison>(built);
}

TEST(Envelope, DebeziumFieldsMakeTheRecord) {
  const MessageMapping mapping({outbox_prefix()}, false);
  const auto r = record_of(mapping, R"({"id":"e-1","aggregatetype":"order","aggregateid":"42","type":"OrderCreated",
      "payload":{"total": 10, "items": ["a"]},"headers":{"traceparent":"00-abc-def-01","n":7}})");
  EXPECT_EQ(r.topic, "outbox.event.order");
  EXPECT_EQ(r.key, std::optional<std::string>("42"));
  EXPECT_EQ(r.value, R"({"total":10,"items":["a"]})");
  EXPECT_EQ(r.event_id, "e-1");
  EXPECT_EQ(r.table, "message:outbox");
  EXPECT_EQ(r.timestamp_ms, kTxn.commit_time_unix_us / 1000);
  const auto h = headers_of(r);
  EXPECT_EQ(h.at("id"), "e-1");
  EXPECT_EQ(h.at("type"), "OrderCreated");
  EXPECT_EQ(h.at("traceparent"), "00-abc-def-01");
  EXPECT_EQ(h.at("n"), "7");
  EXPECT_EQ(h.size(), 4U);
}

TEST(Envelope, StringPayloadIsSentAsItsBytesAndNumbersAsWritten) {
  const MessageMapping mapping({outbox_prefix()}, false);
  const auto r =
      record_of(mapping, R"({"id":17,"aggregatetype":"order","aggregateid":42,"payload":"{\"a\":1} not JSON"})");
  EXPECT_EQ(r.value, R"({"a":1} not JSON)");
  EXPECT_EQ(r.event_id, "17");
  EXPECT_EQ(r.key, std::optional<std::string>("42"));
  EXPECT_EQ(headers_of(r).count("type"), 0U);
}

TEST(Envelope, MissingKeyIsANullKey) {
  const MessageMapping mapping({outbox_prefix()}, false);
  EXPECT_FALSE(record_of(mapping, R"({"id":"1","aggregatetype":"t","payload":{}})").key);
  EXPECT_FALSE(record_of(mapping, R"({"id":"1","aggregatetype":"t","aggregateid":null,"payload":{}})").key);
}

TEST(Envelope, ConfiguredFieldsTemplateAndProvenance) {
  auto m = outbox_prefix();
  m.topic = "shop.${kind}.${agg}";
  m.fields.id = "event_id";
  m.fields.aggregate_type = "agg";
  m.fields.aggregate_id = "key";
  m.fields.payload = "body";
  m.fields.type = "kind";
  m.fields.headers.reset();
  const MessageMapping mapping({m}, true);
  const auto r = record_of(
      mapping, R"({"event_id":"x","agg":"cart","key":"k","body":[1,2],"kind":"Added","headers":{"h":"ignored"}})");
  EXPECT_EQ(r.topic, "shop.Added.cart");
  EXPECT_EQ(r.key, std::optional<std::string>("k"));
  EXPECT_EQ(r.value, "[1,2]");
  const auto h = headers_of(r);
  EXPECT_EQ(h.count("h"), 0U);
  EXPECT_EQ(h.at("pgoutbox.lsn"), kTxn.commit_lsn.to_string());
  EXPECT_EQ(h.at("pgoutbox.xid"), "42");
}

TEST(Envelope, FindMatchesThePrefixExactly) {
  auto other = outbox_prefix();
  other.prefix = "billing";
  const MessageMapping mapping({outbox_prefix(), other}, false);
  EXPECT_EQ(mapping.find("outbox"), std::optional<std::size_t>(0));
  EXPECT_EQ(mapping.find("billing"), std::optional<std::size_t>(1));
  EXPECT_FALSE(mapping.find("Outbox"));
  EXPECT_FALSE(mapping.find("outbox2"));
  EXPECT_FALSE(mapping.find(""));
}

TEST(Envelope, NotJsonOrNotAnObjectIsPoisonWithTheMessageAsValue) {
  const MessageMapping mapping({outbox_prefix()}, false);
  for (const std::string bad : {"", "not json", R"({"id":"1",)", R"(["id"])", "\"id\"", "42", "null"}) {
    const auto p = poison_of(mapping, bad);
    EXPECT_EQ(p.code, "INVALID_ENVELOPE") << bad;
    EXPECT_EQ(p.record.value, bad);
    EXPECT_TRUE(p.record.topic.empty());
  }
}

TEST(Envelope, LackingAnIdIsPoisonThatKeepsTheRest) {
  const MessageMapping mapping({outbox_prefix()}, false);
  for (const std::string bad : {R"({"aggregatetype":"order","aggregateid":"1","payload":{"a":1}})",
                                R"({"id":null,"aggregatetype":"order","aggregateid":"1","payload":{"a":1}})",
                                R"({"id":"","aggregatetype":"order","aggregateid":"1","payload":{"a":1}})",
                                R"({"id":{"x":1},"aggregatetype":"order","aggregateid":"1","payload":{"a":1}})"}) {
    const auto p = poison_of(mapping, bad);
    EXPECT_EQ(p.code, "NULL_ID") << bad;
    EXPECT_EQ(p.record.topic, "outbox.event.order");
    EXPECT_EQ(p.record.key, std::optional<std::string>("1"));
    EXPECT_EQ(p.record.value, R"({"a":1})");
  }
}

TEST(Envelope, OtherProblemsArePoison) {
  const MessageMapping mapping({outbox_prefix()}, false);
  EXPECT_EQ(poison_of(mapping, R"({"id":"1","aggregateid":"1","payload":{}})").code, "NULL_ROUTING_VALUE");
  EXPECT_EQ(poison_of(mapping, R"({"id":"1","aggregatetype":"","payload":{}})").code, "NULL_ROUTING_VALUE");
  EXPECT_EQ(poison_of(mapping, R"({"id":"1","aggregatetype":"bad topic","payload":{}})").code, "INVALID_TOPIC");
  EXPECT_EQ(poison_of(mapping, R"({"id":"1","aggregatetype":"o"})").code, "NULL_PAYLOAD");
  EXPECT_EQ(poison_of(mapping, R"({"id":"1","aggregatetype":"o","payload":null})").code, "NULL_PAYLOAD");
  EXPECT_EQ(poison_of(mapping, R"({"id":"1","aggregatetype":"o","payload":{},"headers":"x"})").code, "INVALID_HEADERS");
  std::string many = R"({"id":"1","aggregatetype":"o","payload":{},"headers":{)";
  for (int i = 0; i < 100; ++i) many += (i ? "," : "") + std::string("\"h") + std::to_string(i) + "\":\"v\"";
  many += "}}";
  const auto p = poison_of(mapping, many);
  EXPECT_EQ(p.code, "TOO_MANY_HEADERS");
  EXPECT_EQ(p.record.headers.size(), 1U);  // only id
}

TEST(Envelope, TopicPatternIsAnAllowList) {
  auto m = outbox_prefix();
  m.topic_pattern = "outbox\\.event\\.(order|cart)";
  const MessageMapping mapping({m}, false);
  EXPECT_EQ(record_of(mapping, R"({"id":"1","aggregatetype":"cart","payload":{}})").topic, "outbox.event.cart");
  EXPECT_EQ(poison_of(mapping, R"({"id":"1","aggregatetype":"user","payload":{}})").code, "INVALID_TOPIC");
}

TEST(Envelope, HeadersCannotImpersonateReservedOnes) {
  const MessageMapping mapping({outbox_prefix()}, false);
  const auto r = record_of(
      mapping,
      R"({"id":"real","aggregatetype":"o","payload":{},"headers":{"id":"fake","pgoutbox.lsn":"0/0","ok":"1"}})");
  const auto h = headers_of(r);
  EXPECT_EQ(h.at("id"), "real");
  EXPECT_EQ(h.count("pgoutbox.lsn"), 0U);
  EXPECT_EQ(h.at("ok"), "1");
}

// A name with a NUL is dropped like a reserved one (a C-string reader sees "id"); a NUL in a
// value that becomes a header (id, type, a header) makes the message poison.
TEST(Envelope, HeaderNamesWithANulAreDroppedAndValuesWithOneArePoison) {
  const MessageMapping mapping({outbox_prefix()}, false);
  const auto r = record_of(
      mapping,
      R"({"id":"real","aggregatetype":"o","payload":{},"headers":{"id\u0000":"SPOOFED","type\u0000x":"t","ok":"1"}})");
  std::vector<std::string> names;
  for (const auto& h : r.headers) names.push_back(h.name);
  EXPECT_EQ(names, (std::vector<std::string>{"id", "ok"}));
  EXPECT_EQ(r.headers[0].value, "real");

  for (const std::string bad :
       {R"({"id":"real\u0000x","aggregatetype":"o","payload":{}})",
        R"({"id":"real","type":"Created\u0000x","aggregatetype":"o","payload":{}})",
        R"({"id":"real","aggregatetype":"o","payload":{},"headers":{"tenant":"acme\u0000other"}})"}) {
    const auto p = poison_of(mapping, bad);
    EXPECT_EQ(p.code, "INVALID_HEADERS") << bad;
    for (const auto& h : p.record.headers) EXPECT_EQ(h.value.find('\0'), std::string::npos) << bad << " " << h.name;
  }
  // A topic quoted in a reason is escaped (the reason is a dead-letter header).
  const auto p = poison_of(mapping, R"({"id":"1","aggregatetype":"o\u0000x","payload":{}})");
  EXPECT_EQ(p.code, "INVALID_TOPIC");
  EXPECT_EQ(p.reason.find('\0'), std::string::npos) << p.reason;
}

// An envelope above the producer's message.max.bytes is poison without being parsed, and the
// poison record does not carry it (its dead-letter copy would be refused for its size too).
TEST(Envelope, AnEnvelopeAboveMessageMaxBytesIsPoisonWithoutBeingParsed) {
  const MessageMapping mapping({outbox_prefix()}, false);
  std::string big = R"({"id":"1","aggregatetype":"o","payload":")";
  big += std::string(kDefaultMaxMessageBytes, 'x') + "\"}";
  const auto p = poison_of(mapping, big);
  EXPECT_EQ(p.code, "ENVELOPE_TOO_LARGE");
  EXPECT_NE(p.reason.find(std::to_string(big.size())), std::string::npos) << p.reason;
  EXPECT_TRUE(p.record.value.empty());
  EXPECT_TRUE(p.record.topic.empty());

  // The same envelope under a larger message.max.bytes is a record.
  auto built = mapping.build(0, big, kTxn, big.size());
  ASSERT_TRUE(std::holds_alternative<Record>(built));
  EXPECT_EQ(std::get<Record>(built).value.size(), kDefaultMaxMessageBytes);

  EXPECT_EQ(max_message_bytes({}), kDefaultMaxMessageBytes);
  EXPECT_EQ(max_message_bytes({{"message.max.bytes", "2097152"}}), 2097152U);
  EXPECT_EQ(max_message_bytes({{"message.max.bytes", "2MB"}}), kDefaultMaxMessageBytes);
}

config::MessageConfig formatted(config::Format type) {
  auto m = outbox_prefix();
  m.format.type = type;
  m.format.source = "/shop/messages/outbox";
  return m;
}

TEST(Envelope, DebeziumJsonTypesKeyAndValueAsDebeziumInfersThemFromTheEnvelope) {
  const MessageMapping mapping({formatted(config::Format::debezium_json)}, false);
  const auto r = record_of(
      mapping, R"({"id":"e-1","aggregatetype":"order","aggregateid":"42","payload":{"total":10,"note":null}})");
  EXPECT_EQ(r.key, std::optional<std::string>(R"({"schema":{"type":"string","optional":true},"payload":"42"})"));
  EXPECT_EQ(r.value, R"({"schema":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"total"}],)"
                     R"("optional":true,"name":"payload"},"payload":{"total":10}})");
  EXPECT_EQ(headers_of(r).at("id"), "e-1");

  // A number key keeps its inferred type; a number id is Java's text of it; a string payload stays one.
  const auto n = record_of(mapping, R"({"id":1.0,"aggregatetype":"order","aggregateid":9000000000,"payload":"x"})");
  EXPECT_EQ(n.key, std::optional<std::string>(R"({"schema":{"type":"int64","optional":true},"payload":9000000000})"));
  EXPECT_EQ(n.value, R"({"schema":{"type":"string","optional":true},"payload":"x"})");
  EXPECT_EQ(headers_of(n).at("id"), "1.0");
}

TEST(Envelope, DebeziumJsonWithoutSchemasAndExpandingAStringPayload) {
  auto m = formatted(config::Format::debezium_json);
  m.format.schemas = false;
  m.format.expand_json_payload = true;
  const MessageMapping mapping({m}, false);
  const auto r = record_of(mapping, R"({"id":"e","aggregatetype":"o","aggregateid":"k","payload":"{\"a\":[1,2]}"})");
  EXPECT_EQ(r.key, std::optional<std::string>(R"("k")"));
  EXPECT_EQ(r.value, R"({"a":[1,2]})");
}

TEST(Envelope, DebeziumJsonRefusesWhatStopsDebeziumsTask) {
  const MessageMapping mapping({formatted(config::Format::debezium_json)}, false);
  EXPECT_EQ(poison_of(mapping, R"({"id":"e","aggregatetype":"o","payload":1})").code, "INVALID_ENVELOPE");
  EXPECT_EQ(poison_of(mapping, R"({"id":"e","aggregatetype":"o","aggregateid":null,"payload":1})").code,
            "INVALID_ENVELOPE");
  EXPECT_EQ(poison_of(mapping, R"({"id":"e","aggregatetype":5,"aggregateid":"k","payload":1})").code,
            "INVALID_ENVELOPE");
  EXPECT_EQ(poison_of(mapping, R"({"id":"e","aggregatetype":"o","aggregateid":"k","payload":[1,"a"]})").code,
            "INVALID_ENVELOPE");
  EXPECT_EQ(poison_of(mapping, R"( {"id":"e","aggregatetype":"o","aggregateid":"k","payload":1})").code,
            "INVALID_ENVELOPE");
}

TEST(Envelope, CloudEventsBinaryModeAddsTheAttributesAsHeaders) {
  auto m = formatted(config::Format::cloudevents_binary);
  m.format.subject_from_key = true;
  const MessageMapping mapping({m}, false);
  const auto r = record_of(mapping, R"({"id":"e-1","aggregatetype":"order","aggregateid":"42","type":"OrderCreated",
      "payload":{"total":10},"headers":{"traceparent":"00-abc-def-01"}})");
  EXPECT_EQ(r.value, R"({"total":10})");
  EXPECT_EQ(r.key, std::optional<std::string>("42"));
  const auto h = headers_of(r);
  EXPECT_EQ(h.at("ce_specversion"), "1.0");
  EXPECT_EQ(h.at("ce_id"), "e-1");
  EXPECT_EQ(h.at("ce_source"), "/shop/messages/outbox");
  EXPECT_EQ(h.at("ce_type"), "OrderCreated");
  EXPECT_EQ(h.at("ce_time"), "2023-11-14T22:13:20.000Z");
  EXPECT_EQ(h.at("ce_subject"), "42");
  EXPECT_EQ(h.at("ce_traceparent"), "00-abc-def-01");
  EXPECT_EQ(h.at("content-type"), "application/json");

  const auto text = record_of(mapping, R"({"id":"e","aggregatetype":"o","type":"T","payload":"plain"})");
  EXPECT_EQ(headers_of(text).at("content-type"), "text/plain; charset=utf-8");
  EXPECT_EQ(headers_of(text).count("ce_subject"), 0U);
}

TEST(Envelope, CloudEventsStructuredModeCarriesThePayloadAsData) {
  auto m = formatted(config::Format::cloudevents_structured);
  m.format.event_type = "com.example.${aggregatetype}.${type}";
  const MessageMapping mapping({m}, false);
  const auto r = record_of(mapping, R"({"id":"e-1","aggregatetype":"order","type":"Created","payload":{"a":1}})");
  EXPECT_EQ(r.value, R"({"specversion":"1.0","id":"e-1","source":"/shop/messages/outbox",)"
                     R"("type":"com.example.order.Created","time":"2023-11-14T22:13:20.000Z",)"
                     R"("datacontenttype":"application/json","data":{"a":1}})");
  EXPECT_EQ(headers_of(r).at("content-type"), "application/cloudevents+json");

  // A string payload must hold JSON to be the event's data; a type that comes out empty is refused.
  EXPECT_EQ(poison_of(mapping, R"({"id":"e","aggregatetype":"o","type":"T","payload":"not json"})").code,
            "INVALID_JSON");
  EXPECT_EQ(poison_of(mapping, R"({"id":"e","aggregatetype":"o","payload":{}})").code, "NULL_EVENT_TYPE");
}

}  // namespace
}  // namespace pgoutbox::outbox
