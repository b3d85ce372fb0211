// Connector configurations as Debezium's documentation and its users write them, converted, then
// loaded with pgoutbox's own loader: the values a consumer depends on (topic, key, id header,
// partitioner) must come out the same, and every setting left behind must be named.
#include "pgoutbox/debezium/from_debezium.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <algorithm>
#include <map>
#include <memory>
#include <regex>

#include "pgoutbox/config/loader.h"

namespace pgoutbox::debezium {
namespace {

config::Config load(const Conversion& c) {
  return config::load_string(c.yaml, "converted.yaml", config::Environment{});
}

// The left-out line for `setting`, or "" when there is none.
std::string left_out(const Conversion& c, const std::string& setting) {
  const auto it = std::find_if(c.left_out.begin(), c.left_out.end(),
                               [&](const std::string& line) { return line.starts_with(setting + ": "); });
  return it == c.left_out.end() ? std::string() : *it;
}

std::string all_output(const Conversion& c) {
  std::string out = c.yaml;
  for (const auto& line : c.left_out) out += line + "\n";
  return out;
}

// Debezium's outbox example: the defaults everywhere but the database and the table.
TEST(FromDebezium, MinimalConnectorKeepsTopicsKeysAndIdHeader) {
  const auto c = from_debezium(R"json({
    "name": "outbox-connector",
    "config": {
      "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
      "tasks.max": "1",
      "database.hostname": "postgres",
      "database.port": 5432,
      "database.user": "debezium",
      "database.password": "s3cr3t-pw",
      "database.dbname": "orders",
      "topic.prefix": "dbserver1",
      "plugin.name": "pgoutput",
      "table.include.list": "public.outbox",
      "key.converter": "org.apache.kafka.connect.storage.StringConverter",
      "value.converter": "org.apache.kafka.connect.storage.StringConverter",
      "transforms": "outbox",
      "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"
    }})json");
  const auto cfg = load(c);
  EXPECT_EQ(cfg.postgres.dsn, "host=postgres port=5432 dbname=orders user=debezium");
  EXPECT_EQ(cfg.postgres.slot, "debezium");
  EXPECT_EQ(cfg.postgres.publication, "dbz_publication");
  EXPECT_FALSE(cfg.postgres.create_slot);  // taking over Debezium's slot, never a fresh one
  EXPECT_FALSE(cfg.postgres.create_publication);
  EXPECT_EQ(cfg.kafka.properties.at("partitioner"), "murmur2_random");
  ASSERT_EQ(cfg.tables.size(), 1U);
  const auto& t = cfg.tables[0];
  EXPECT_EQ(t.schema, "public");
  EXPECT_EQ(t.name, "outbox");
  EXPECT_EQ(t.topic, "outbox.event.${aggregatetype}");
  EXPECT_EQ(t.columns.id, "id");
  EXPECT_EQ(t.columns.aggregate_type, "aggregatetype");
  EXPECT_EQ(t.columns.aggregate_id, "aggregateid");
  EXPECT_EQ(t.columns.payload, "payload");
  EXPECT_FALSE(t.columns.type.has_value());  // Debezium sends no type header by default
  EXPECT_FALSE(t.validate_json);
  EXPECT_EQ(t.null_payload, config::NullPayload::poison);
  // The password is never copied, and the output says where it goes instead.
  EXPECT_EQ(all_output(c).find("s3cr3t-pw"), std::string::npos);
  EXPECT_NE(left_out(c, "database.password").find("PGOUTBOX_POSTGRES_PASSWORD"), std::string::npos);
  EXPECT_NE(left_out(c, "topic.prefix"), "");
  EXPECT_NE(left_out(c, "bootstrap.servers").find("PGOUTBOX_KAFKA_BROKERS"), std::string::npos);
  EXPECT_EQ(left_out(c, "plugin.name"), "");
  EXPECT_EQ(left_out(c, "key.converter"), "");
}

// route.topic.replacement ${routedByValue} alone: a row could name pgoutbox's checkpoint or
// dead-letter topic, which a configuration may not allow (issue 25 item 2). The output still
// loads: its topic_pattern excludes those two, and the left-out list says so.
TEST(FromDebezium, ATemplateThatCouldReachAReservedTopicGetsAPatternExcludingIt) {
  const auto c = from_debezium(R"json({
      "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
      "database.hostname": "pg", "database.dbname": "orders", "database.user": "u",
      "table.include.list": "public.outbox",
      "transforms": "outbox",
      "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
      "transforms.outbox.route.topic.replacement": "${routedByValue}"})json");
  const auto cfg = load(c);
  ASSERT_EQ(cfg.tables.size(), 1U);
  EXPECT_EQ(cfg.tables[0].topic, "${aggregatetype}");
  const std::regex pattern(cfg.tables[0].topic_pattern);
  EXPECT_TRUE(std::regex_match("orders", pattern));
  EXPECT_FALSE(std::regex_match(cfg.checkpoint.topic, pattern));
  EXPECT_FALSE(std::regex_match(cfg.poison.dead_letter_topic, pattern));
  EXPECT_NE(left_out(c, "transforms.outbox.route.topic.replacement").find("checkpoint"), std::string::npos);
}

// An existing table with its own column names, the type as a header, a trace header and an
// envelope field, and the JSON payload expanded.
TEST(FromDebezium, CustomColumnsAndAdditionalPlacement) {
  const auto c = from_debezium(R"json({
    "name": "shop-outbox",
    "config": {
      "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
      "database.hostname": "db.internal",
      "database.port": "6432",
      "database.user": "cdc",
      "database.dbname": "shop",
      "database.sslmode": "verify-full",
      "database.sslrootcert": "/etc/ssl/db ca.pem",
      "plugin.name": "pgoutput",
      "slot.name": "shop_outbox",
      "publication.name": "shop_outbox_pub",
      "table.include.list": "shop\\.events_outbox",
      "transforms": "outbox",
      "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
      "transforms.outbox.table.field.event.id": "event_id",
      "transforms.outbox.table.field.event.key": "order_id",
      "transforms.outbox.table.field.event.payload": "body",
      "transforms.outbox.table.field.event.timestamp": "created_at",
      "transforms.outbox.table.fields.additional.placement": "event_type:header:type,trace:header:traceparent,tenant:envelope:tenant",
      "transforms.outbox.table.expand.json.payload": "true",
      "value.converter": "org.apache.kafka.connect.storage.StringConverter",
      "key.converter": "org.apache.kafka.connect.storage.StringConverter"
    }})json");
  const auto cfg = load(c);
  EXPECT_EQ(cfg.postgres.dsn,
            "host=db.internal port=6432 dbname=shop user=cdc sslmode=verify-full sslrootcert='/etc/ssl/db ca.pem'");
  EXPECT_EQ(cfg.postgres.slot, "shop_outbox");
  EXPECT_EQ(cfg.postgres.publication, "shop_outbox_pub");
  ASSERT_EQ(cfg.tables.size(), 1U);
  const auto& t = cfg.tables[0];
  EXPECT_EQ(t.schema, "shop");
  EXPECT_EQ(t.name, "events_outbox");
  EXPECT_EQ(t.columns.id, "event_id");
  EXPECT_EQ(t.columns.aggregate_id, "order_id");
  EXPECT_EQ(t.columns.payload, "body");
  EXPECT_EQ(t.columns.timestamp, "created_at");
  EXPECT_EQ(t.columns.type, "event_type");
  EXPECT_TRUE(t.type_column_explicit);
  EXPECT_TRUE(t.validate_json);
  const auto placement = left_out(c, "transforms.outbox.table.fields.additional.placement");
  EXPECT_NE(placement.find("traceparent"), std::string::npos);
  const auto envelope = std::count_if(c.left_out.begin(), c.left_out.end(), [](const std::string& line) {
    return line.find("tenant:envelope:tenant") != std::string::npos;
  });
  EXPECT_EQ(envelope, 1);
  EXPECT_NE(left_out(c, "transforms.outbox.table.expand.json.payload"), "");
}

// Routing by another column into a topic name of the team's own, the bare config map (as in a
// Connect REST PUT), several tables, and producer overrides.
TEST(FromDebezium, RouteByAnotherFieldWithReplacementAndProducerOverrides) {
  const auto c = from_debezium(R"json({
      "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
      "database.hostname": "10.0.0.5",
      "database.user": "relay",
      "database.dbname": "billing",
      "plugin.name": "pgoutput",
      "slot.name": "billing_outbox",
      "publication.name": "billing_pub",
      "table.include.list": "public.invoice_outbox, Payments.Outbox, public.audit_.*",
      "transforms": "router",
      "transforms.router.type": "io.debezium.transforms.outbox.EventRouter",
      "transforms.router.route.by.field": "destination",
      "transforms.router.route.topic.replacement": "billing.${routedByValue}.events",
      "transforms.router.route.tombstone.on.empty.payload": "true",
      "producer.override.bootstrap.servers": "kafka-1:9092,kafka-2:9092",
      "producer.override.linger.ms": "20",
      "producer.override.compression.type": "zstd",
      "producer.override.max.request.size": "2097152",
      "producer.override.acks": "all",
      "producer.override.security.protocol": "SASL_SSL",
      "producer.override.sasl.mechanism": "SCRAM-SHA-512",
      "producer.override.partitioner.class": "org.example.RegionPartitioner"
  })json");
  const auto cfg = load(c);
  EXPECT_EQ(cfg.postgres.dsn, "host=10.0.0.5 dbname=billing user=relay");
  EXPECT_EQ(cfg.postgres.slot, "billing_outbox");
  EXPECT_EQ(cfg.postgres.publication, "billing_pub");
  EXPECT_EQ(cfg.kafka.brokers, "kafka-1:9092,kafka-2:9092");
  const auto& p = cfg.kafka.properties;
  EXPECT_EQ(p.at("linger.ms"), "20");
  EXPECT_EQ(p.at("compression.type"), "zstd");
  EXPECT_EQ(p.at("message.max.bytes"), "2097152");
  EXPECT_EQ(p.at("security.protocol"), "SASL_SSL");
  EXPECT_EQ(p.at("sasl.mechanisms"), "SCRAM-SHA-512");
  EXPECT_EQ(p.at("partitioner"), "murmur2_random");
  EXPECT_EQ(p.count("acks"), 0U);  // pgoutbox's own, fixed
  EXPECT_NE(left_out(c, "producer.override.partitioner.class"), "");
  EXPECT_EQ(left_out(c, "producer.override.acks"), "");
  EXPECT_EQ(left_out(c, "bootstrap.servers"), "");
  // Debezium matches catalog names, so Payments.Outbox is "Payments"."Outbox"; a pattern
  // matching many tables cannot name one.
  ASSERT_EQ(cfg.tables.size(), 2U);
  EXPECT_EQ(cfg.tables[1].schema, "Payments");
  EXPECT_EQ(cfg.tables[1].name, "Outbox");
  EXPECT_NE(left_out(c, "table.include.list").find("public.audit_.*"), std::string::npos);
  const auto& t = cfg.tables[0];
  EXPECT_EQ(t.name, "invoice_outbox");
  EXPECT_EQ(t.topic, "billing.${destination}.events");
  EXPECT_EQ(t.columns.aggregate_type, "destination");
  EXPECT_EQ(t.null_payload, config::NullPayload::tombstone);
}

// A connector carrying what pgoutbox does not do: other SMTs, snapshots, heartbeats, signals,
// JSON converters, a weaker acks, decoderbufs, a JAAS password. Each is named with why; the
// rest still converts and loads, and no secret leaks.
TEST(FromDebezium, UnsupportedSettingsAreListedAndTheRestConverts) {
  const auto c = from_debezium(R"json({
    "name": "legacy",
    "config": {
      "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
      "database.hostname": "pg",
      "database.dbname": "app",
      "database.user": "dbz",
      "plugin.name": "decoderbufs",
      "snapshot.mode": "initial",
      "heartbeat.interval.ms": "10000",
      "heartbeat.action.query": "UPDATE heartbeat SET ts = now()",
      "signal.data.collection": "public.debezium_signal",
      "publication.autocreate.mode": "filtered",
      "table.include.list": "public.outbox",
      "key.converter": "org.apache.kafka.connect.json.JsonConverter",
      "key.converter.schemas.enable": "false",
      "transforms": "filter,outbox,rename",
      "transforms.filter.type": "io.debezium.transforms.Filter",
      "transforms.filter.language": "jsr223.groovy",
      "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
      "transforms.outbox.route.topic.regex": "(?<routedByValue>[a-z]+)_.*",
      "transforms.rename.type": "org.apache.kafka.connect.transforms.RegexRouter",
      "transforms.rename.regex": "(.*)",
      "transforms.rename.replacement": "prod.$1",
      "producer.override.acks": "1",
      "producer.override.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"dbz\" password=\"jaas-pw-42\";",
      "producer.override.ssl.truststore.location": "/etc/kafka/truststore.jks",
      "poll.interval.ms": "100",
      "custom.unknown.setting": "x"
}
})json");
  const auto cfg = load(c);
  EXPECT_EQ(cfg.tables.at(0).topic, "outbox.event.${aggregatetype}");
  for (const auto* setting :
       {"plugin.name", "snapshot.mode", "heartbeat.interval.ms", "heartbeat.action.query", "signal.data.collection",
        "publication.autocreate.mode", "key.converter", "value.converter", "transforms.filter", "transforms.rename",
        "transforms.outbox.route.topic.regex", "producer.override.acks", "producer.override.sasl.jaas.config",
        "producer.override.ssl.truststore.location", "poll.interval.ms", "custom.unknown.setting"}) {
    EXPECT_NE(left_out(c, setting), "") << setting;
  }
  EXPECT_NE(left_out(c, "key.converter").find("JsonConverter"), std::string::npos);
  EXPECT_NE(left_out(c, "plugin.name").find("decoderbufs"), std::string::npos);
  // A transform's own options are part of its line, not lines of their own.
  EXPECT_EQ(left_out(c, "transforms.filter.language"), "");
  EXPECT_EQ(left_out(c, "key.converter.schemas.enable"), "");
  EXPECT_EQ(cfg.kafka.properties.at("sasl.username"), "dbz");
  EXPECT_EQ(all_output(c).find("jaas-pw-42"), std::string::npos);
}

// libpq's value of each keyword after parsing `dsn` (PQconninfoParse, which the connection itself
// uses); an empty map when libpq refuses the string.
std::map<std::string, std::string> parsed_by_libpq(const std::string& dsn) {
  char* error = nullptr;
  const std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> options(PQconninfoParse(dsn.c_str(), &error),
                                                                             &PQconninfoFree);
  if (error != nullptr) PQfreemem(error);
  std::map<std::string, std::string> values;
  if (!options) return values;
  for (const auto* o = options.get(); o->keyword != nullptr; ++o) {
    if (o->val != nullptr) values[o->keyword] = o->val;
  }
  return values;
}

// Issue 25 item 7: a value with any byte libpq takes for a separator (isspace: \n \r \f \v \t and
// the space), a quote or a backslash must reach the DSN quoted, so that it stays the one value
// it was and cannot add keywords (here host and sslmode) of its own.
TEST(FromDebezium, ConnectorValuesCannotInjectDsnKeywords) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"(/k\nhost=evil\nsslmode=disable)", "/k\nhost=evil\nsslmode=disable"},
      {R"(/k\rhost=evil\rsslmode=disable)", "/k\rhost=evil\rsslmode=disable"},
      {R"(/k\fhost=evil\fsslmode=disable)", "/k\fhost=evil\fsslmode=disable"},
      {R"(/k\u000bhost=evil\u000bsslmode=disable)", "/k\vhost=evil\vsslmode=disable"},
      {R"(/k\thost=evil\tsslmode=disable)", "/k\thost=evil\tsslmode=disable"},
      {R"(/k host=evil sslmode=disable)", "/k host=evil sslmode=disable"},
      {R"(/k' host=evil sslmode='disable)", "/k' host=evil sslmode='disable"},
      {R"(/k\\' host=evil sslmode=disable)", "/k\\' host=evil sslmode=disable"},
  };
  for (const auto& [json_value, value] : cases) {
    const auto c = from_debezium(R"json({
      "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
      "database.hostname": "pg.internal",
      "database.dbname": "app",
      "database.sslmode": "verify-full",
      "database.sslkey": ")json" +
                                 json_value + R"json(",
      "table.include.list": "public.outbox",
      "transforms": "outbox",
      "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"})json");
    const auto dsn = load(c).postgres.dsn;
    const auto parsed = parsed_by_libpq(dsn);
    ASSERT_FALSE(parsed.empty()) << "libpq refuses " << dsn;
    EXPECT_EQ(parsed.at("sslkey"), value) << dsn;
    EXPECT_EQ(parsed.at("host"), "pg.internal") << dsn;
    EXPECT_EQ(parsed.at("sslmode"), "verify-full") << dsn;
    EXPECT_EQ(parsed.at("dbname"), "app") << dsn;
  }
  // A NUL would end the C string libpq reads inside the value: refused, not cut.
  EXPECT_THROW(from_debezium(R"json({
      "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
      "database.hostname": "pg\u0000 host=evil",
      "table.include.list": "public.outbox",
      "transforms": "outbox",
      "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"})json"),
               Unusable);
}

// A connector with the outbox router and `extra` settings (JSON members, each followed by a comma).
std::string connector_with(const std::string& extra) {
  return R"json({"config": {
      "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
      "database.hostname": "postgres", "database.dbname": "orders", "database.user": "debezium",
      "topic.prefix": "dbserver1", "table.include.list": "public.outbox",)json" +
         extra + R"json(
      "transforms": "outbox",
      "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"}})json";
}

constexpr const char* kJson = "org.apache.kafka.connect.json.JsonConverter";

TEST(FromDebezium, JsonConvertersBecomeFormatDebeziumJsonWithTheirSchemasEnable) {
  const std::string both = std::string(R"("key.converter": ")") + kJson + R"(", "value.converter": ")" + kJson + "\",";
  {
    const auto c = from_debezium(connector_with(both));
    const auto t = load(c).tables.at(0);
    EXPECT_EQ(t.format.type, config::Format::debezium_json);
    EXPECT_TRUE(t.format.schemas);  // JsonConverter's default
    EXPECT_FALSE(t.format.expand_json_payload);
    EXPECT_EQ(t.null_payload, config::NullPayload::json_null);  // the router writes {"payload": null}
    EXPECT_EQ(left_out(c, "key.converter"), "");
  }
  {
    const auto c = from_debezium(connector_with(both + R"("key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": false, "transforms.outbox.table.expand.json.payload": "true",
        "transforms.outbox.route.tombstone.on.empty.payload": "true",)"));
    const auto t = load(c).tables.at(0);
    EXPECT_EQ(t.format.type, config::Format::debezium_json);
    EXPECT_FALSE(t.format.schemas);
    EXPECT_TRUE(t.format.expand_json_payload);
    EXPECT_FALSE(t.validate_json);
    EXPECT_EQ(t.null_payload, config::NullPayload::tombstone);
  }
}

TEST(FromDebezium, TheWorkersConvertersApplyWhereTheConnectorSetsNone) {
  const std::string worker = std::string("# worker\nbootstrap.servers=kafka:9092\nkey.converter = ") + kJson +
                             "\nvalue.converter:" + kJson + "\nvalue.converter.schemas.enable=false\n" +
                             "key.converter.schemas.enable=false\n";
  const auto from_worker = load(from_debezium(connector_with(""), worker)).tables.at(0);
  EXPECT_EQ(from_worker.format.type, config::Format::debezium_json);
  EXPECT_FALSE(from_worker.format.schemas);
  // The connector's own setting wins.
  const auto own =
      load(from_debezium(connector_with(R"("key.converter": "org.apache.kafka.connect.storage.StringConverter",
      "value.converter": "org.apache.kafka.connect.storage.StringConverter",)"),
                         worker))
          .tables.at(0);
  EXPECT_EQ(own.format.type, config::Format::string);
  // Without either, the worker's converter is unknown: string, and the output says so.
  const auto unknown = from_debezium(connector_with(""));
  EXPECT_EQ(load(unknown).tables.at(0).format.type, config::Format::string);
  EXPECT_NE(left_out(unknown, "key.converter").find("--worker"), std::string::npos);
}

TEST(FromDebezium, ConvertersPgoutboxCannotReproduceAreNamedWithTheReason) {
  const auto mixed = from_debezium(connector_with(
      std::string(R"("key.converter": "org.apache.kafka.connect.storage.StringConverter", "value.converter": ")") +
      kJson + "\","));
  EXPECT_EQ(load(mixed).tables.at(0).format.type, config::Format::string);
  EXPECT_NE(left_out(mixed, "value.converter").find("covers both alike"), std::string::npos);
  const auto avro = from_debezium(connector_with(
      R"("key.converter": "io.confluent.connect.avro.AvroConverter", "value.converter": "io.confluent.connect.avro.AvroConverter",)"));
  EXPECT_NE(left_out(avro, "value.converter").find("schema registry"), std::string::npos);
  const auto half_schemas =
      from_debezium(connector_with(std::string(R"("key.converter": ")") + kJson + R"(", "value.converter": ")" + kJson +
                                   R"(", "value.converter.schemas.enable": "false",)"));
  EXPECT_EQ(load(half_schemas).tables.at(0).format.type, config::Format::string);
  EXPECT_NE(left_out(half_schemas, "value.converter").find("without schemas"), std::string::npos);
}

TEST(FromDebezium, WorkerPropertiesAreReadAsJavaReadsThem) {
  const auto p = parse_properties("# c\n! c\n  a = 1\nb:2\nc 3\nd=x\\\n   y\ne=\\u\\=\\:\\\\\r\nf\n");
  EXPECT_EQ(p.at("a"), "1");
  EXPECT_EQ(p.at("b"), "2");
  EXPECT_EQ(p.at("c"), "3");
  EXPECT_EQ(p.at("d"), "xy");
  EXPECT_EQ(p.at("e"), "u=:\\");
  EXPECT_EQ(p.at("f"), "");
}

// A message outbox as Debezium relays one: DecodeLogicalDecodingMessageContent before the router.
std::string message_connector(const std::string& extra) {
  return R"json({"config": {
      "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
      "database.hostname": "postgres", "database.dbname": "orders", "database.user": "debezium",
      "key.converter": "org.apache.kafka.connect.json.JsonConverter",
      "value.converter": "org.apache.kafka.connect.json.JsonConverter",
      "topic.prefix": "dbserver1", "plugin.name": "pgoutput",)json" +
         extra + R"json(
      "transforms": "decode,outbox",
      "transforms.decode.type": "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent",
      "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"}})json";
}

TEST(FromDebezium, TheMessageDecoderBeforeTheRouterBecomesMessageOutboxes) {
  const auto c = from_debezium(message_connector(R"("message.prefix.include.list": "orders,billing",
      "key.converter.schemas.enable": "false", "value.converter.schemas.enable": "false",
      "transforms.outbox.table.field.event.key": "account",)"));
  const auto cfg = load(c);
  EXPECT_TRUE(cfg.tables.empty()) << c.yaml;  // no table.include.list: messages only
  ASSERT_EQ(cfg.messages.size(), 2U) << c.yaml;
  EXPECT_EQ(cfg.messages[0].prefix, "orders");
  EXPECT_EQ(cfg.messages[1].prefix, "billing");
  const auto& m = cfg.messages[0];
  EXPECT_EQ(m.topic, "outbox.event.${aggregatetype}");
  EXPECT_EQ(m.format.type, config::Format::debezium_json);
  EXPECT_FALSE(m.format.schemas);
  EXPECT_EQ(m.fields.aggregate_id, "account");
  EXPECT_FALSE(m.fields.type);     // Debezium sends no type header unless placed
  EXPECT_FALSE(m.fields.headers);  // nor the envelope's headers
  EXPECT_EQ(left_out(c, "transforms.decode"), "");
  EXPECT_EQ(left_out(c, "message.prefix.include.list"), "");
}

TEST(FromDebezium, MessagesWhoseBytesCannotBeReproducedAreNamedWithTheReason) {
  // A pattern is not a prefix.
  auto c = from_debezium(message_connector(R"("message.prefix.include.list": "orders,bill.*",)"));
  EXPECT_EQ(load(c).messages.size(), 1U);
  EXPECT_NE(left_out(c, "message.prefix.include.list").find("bill.*"), std::string::npos) << all_output(c);
  // Blank payloads as tombstones, or nulls decoded as bytes: no message outbox at all.
  c = from_debezium(message_connector(R"("message.prefix.include.list": "orders",
      "transforms.outbox.route.tombstone.on.empty.payload": "true", "table.include.list": "public.outbox",)"));
  EXPECT_TRUE(load(c).messages.empty());
  EXPECT_NE(left_out(c, "transforms.decode").find("tombstone"), std::string::npos) << all_output(c);
  c = from_debezium(message_connector(R"("message.prefix.include.list": "orders",
      "transforms.decode.fields.null.include": "true", "table.include.list": "public.outbox",)"));
  EXPECT_TRUE(load(c).messages.empty());
  EXPECT_NE(left_out(c, "transforms.decode.fields.null.include").find("bytes"), std::string::npos) << all_output(c);
  // Without the decoder, the router sees no outbox record in a message.
  c = from_debezium(connector_with(R"("message.prefix.include.list": "orders",)"));
  EXPECT_TRUE(load(c).messages.empty());
  EXPECT_NE(left_out(c, "message.prefix.include.list").find("DecodeLogicalDecodingMessageContent"), std::string::npos);
}

TEST(FromDebezium, UnusableInputIsRefused) {
  EXPECT_THROW(from_debezium("{not json"), Unusable);
  EXPECT_THROW(from_debezium("[1, 2]"), Unusable);
  EXPECT_THROW(from_debezium(R"json({"connector.class": "io.debezium.connector.mysql.MySqlConnector",
      "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"})json"),
               Unusable);
  // A Postgres connector without the EventRouter publishes change events, not outbox records.
  EXPECT_THROW(from_debezium(R"json({"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
      "table.include.list": "public.outbox"})json"),
               Unusable);
  // A replacement that can never be a topic name.
  EXPECT_THROW(from_debezium(R"json({"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
      "transforms": "o", "transforms.o.type": "io.debezium.transforms.outbox.EventRouter",
      "transforms.o.route.topic.replacement": "events/${routedByValue}"})json"),
               Unusable);
}

}  // namespace
}  // namespace pgoutbox::debezium
