// The YAML file: defaults, every key, and the message for each thing that can be wrong in it.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "config_test_util.h"
#include "pgoutbox/config/redact.h"
#include "pgoutbox/config/schema.h"

namespace pgoutbox::config {
namespace {

using namespace std::chrono_literals;
using test::error_of;
using test::kMinimal;
using test::load_yaml;

TEST(ConfigLoader, DefaultsApplied) {
  const Config c = load_yaml(kMinimal);
  const Config defaults;
  EXPECT_EQ(c.source, "config.yaml");
  EXPECT_EQ(c.postgres.dsn, "host=db dbname=app user=pgoutbox");
  EXPECT_EQ(c.postgres.password, "");
  EXPECT_EQ(c.postgres.slot, "pgoutbox");
  EXPECT_EQ(c.postgres.publication, "pgoutbox");
  EXPECT_TRUE(c.postgres.create_slot);
  EXPECT_FALSE(c.postgres.create_publication);
  EXPECT_EQ(c.postgres.status_interval, 10s);
  EXPECT_EQ(c.postgres.application_name, "pgoutbox");
  EXPECT_EQ(c.kafka.brokers, "kafka:9092");
  EXPECT_TRUE(c.kafka.properties.empty());
  ASSERT_EQ(c.tables.size(), 1U);
  const TableConfig& t = c.tables[0];
  EXPECT_EQ(t.schema, "public");
  EXPECT_EQ(t.name, "outbox");
  EXPECT_EQ(t.topic, "outbox.event.${aggregatetype}");
  EXPECT_EQ(t.null_payload, NullPayload::poison);
  EXPECT_EQ(t.columns.id, "id");
  EXPECT_EQ(t.columns.aggregate_type, "aggregatetype");
  EXPECT_EQ(t.columns.aggregate_id, "aggregateid");
  EXPECT_EQ(t.columns.payload, "payload");
  EXPECT_EQ(t.columns.type, std::optional<std::string>("type"));
  EXPECT_FALSE(t.type_column_explicit);
  EXPECT_EQ(t.columns.headers, std::nullopt);
  EXPECT_EQ(t.columns.timestamp, std::nullopt);
  EXPECT_FALSE(c.provenance_headers);
  EXPECT_EQ(c.limits.max_in_flight_records, 20'000U);
  EXPECT_EQ(c.limits.max_in_flight_bytes, 16ULL << 20);
  EXPECT_EQ(c.limits.resume_ratio, 0.5);
  EXPECT_EQ(c.reconnect.min, 500ms);
  EXPECT_EQ(c.reconnect.max, 30s);
  EXPECT_EQ(c.reconnect.factor, 2.0);
  EXPECT_EQ(c.shutdown_timeout, 30s);
  EXPECT_EQ(c.metrics_address, "");
  EXPECT_EQ(c.log_format, "auto");
  EXPECT_EQ(c.log_level, "info");
}

const std::string kEverything = R"(postgres:
  dsn: "host=pg port=6432 dbname=shop user=relay"
  slot: shop_slot
  publication: shop_pub
  create_slot: false
  failover_slot: true
  create_publication: true
  primary_dsn: "host=pg-primary port=5432 dbname=shop user=relay"
  status_interval: 2s
  application_name: relay-1
kafka:
  brokers: "k1:9092,k2:9092"
  transactional_id: shop-relay
  transaction_interval: 250ms
  send_when_caught_up: false
  alternate_producers: false
  properties:
    linger.ms: 5
    compression.type: zstd
tables:
  - table: '"Sales"."Order Events"'
    topic: "shop.${aggregate}.${kind}"
    null_payload: tombstone
    validate_json: true
    topic_pattern: "shop\\.[a-z]+\\.[A-Za-z]+"
    format:
      type: debezium-json
      schemas: false
      expand_json_payload: true
      source: /shop/sales
      event_type: "com.example.${kind}"
      subject_from_key: true
    columns:
      id: event_id
      aggregate_type: aggregate
      aggregate_id: key_col
      payload: body
      type: kind
      headers: hdrs
      timestamp: created_at
    backfill:
      where: "status = 'NEW'"
      order_by: created_at
      chunk_rows: 500
      statement_timeout: 90s
  - table: audit_outbox
messages:
  - prefix: shop
    topic: "shop.msg.${agg}"
    topic_pattern: "shop\\.msg\\.[a-z]+"
    fields:
      id: event_id
      aggregate_type: agg
      aggregate_id: key
      payload: body
      type: kind
      headers: null
    format:
      type: debezium-json
      schemas: false
      expand_json_payload: true
      source: /shop/msgs
      event_type: "com.example.msg.${kind}"
      subject_from_key: true
provenance_headers: true
limits:
  max_in_flight_records: 5000
  max_in_flight_bytes: 48MiB
  resume_ratio: 0.25
reconnect:
  min: 100ms
  max: 1m30s
  factor: 1.5
poison:
  policy: dead-letter
  dead_letter_topic: shop.dlq
  max_retries: 7
  retry_backoff: 250ms
delivery: exactly-once
checkpoint:
  topic: shop.checkpoints
  interval: 2s
shutdown_timeout: 45s
metrics_address: "0.0.0.0:9300"
metrics_allowed_hosts: "pgoutbox.shop.svc"
metrics_topic_labels: 20
log_format: json
log_level: debug
)";

// kEverything runs exactly-once, which needs a checkpoint signing key; a secret, so from the
// environment.
const test::Vars kSigningKey = {{"PGOUTBOX_CHECKPOINT_SIGNING_KEY", std::string(64, 'k')}};

TEST(ConfigLoader, EveryKeyParsed) {
  const Config c = load_yaml(kEverything, kSigningKey);
  EXPECT_EQ(c.postgres.dsn, "host=pg port=6432 dbname=shop user=relay");
  EXPECT_EQ(c.postgres.slot, "shop_slot");
  EXPECT_EQ(c.postgres.publication, "shop_pub");
  EXPECT_FALSE(c.postgres.create_slot);
  EXPECT_TRUE(c.postgres.failover_slot);
  EXPECT_TRUE(c.postgres.create_publication);
  EXPECT_EQ(c.postgres.primary_dsn, "host=pg-primary port=5432 dbname=shop user=relay");
  EXPECT_EQ(c.postgres.status_interval, 2s);
  EXPECT_EQ(c.postgres.application_name, "relay-1");
  EXPECT_EQ(c.kafka.brokers, "k1:9092,k2:9092");
  EXPECT_EQ(c.kafka.properties, (std::map<std::string, std::string>{{"compression.type", "zstd"}, {"linger.ms", "5"}}));
  ASSERT_EQ(c.tables.size(), 2U);
  const TableConfig& t = c.tables[0];
  EXPECT_EQ(t.schema, "Sales");
  EXPECT_EQ(t.name, "Order Events");
  EXPECT_EQ(t.topic, "shop.${aggregate}.${kind}");
  EXPECT_EQ(t.null_payload, NullPayload::tombstone);
  EXPECT_TRUE(t.validate_json);
  EXPECT_FALSE(c.tables[1].validate_json);
  EXPECT_EQ(c.poison.policy, PoisonPolicy::dead_letter);
  EXPECT_EQ(c.poison.dead_letter_topic, "shop.dlq");
  EXPECT_EQ(c.poison.max_retries, 7U);
  EXPECT_EQ(c.poison.retry_backoff, 250ms);
  EXPECT_EQ(t.columns.id, "event_id");
  EXPECT_EQ(t.columns.aggregate_type, "aggregate");
  EXPECT_EQ(t.columns.aggregate_id, "key_col");
  EXPECT_EQ(t.columns.payload, "body");
  EXPECT_EQ(t.columns.type, std::optional<std::string>("kind"));
  EXPECT_TRUE(t.type_column_explicit);
  EXPECT_EQ(t.columns.headers, std::optional<std::string>("hdrs"));
  EXPECT_EQ(t.columns.timestamp, std::optional<std::string>("created_at"));
  EXPECT_EQ(t.backfill.where, "status = 'NEW'");
  EXPECT_EQ(t.backfill.order_by, "created_at");
  EXPECT_EQ(t.backfill.chunk_rows, 500U);
  EXPECT_EQ(t.backfill.statement_timeout, std::chrono::seconds(90));
  EXPECT_FALSE(c.tables[1].backfill.enabled());
  EXPECT_EQ(c.tables[1].schema, "public");
  EXPECT_EQ(c.tables[1].name, "audit_outbox");
  EXPECT_FALSE(c.tables[1].type_column_explicit);
  EXPECT_TRUE(c.provenance_headers);
  EXPECT_EQ(c.limits.max_in_flight_records, 5000U);
  EXPECT_EQ(c.limits.max_in_flight_bytes, 48ULL << 20);
  EXPECT_EQ(c.limits.resume_ratio, 0.25);
  EXPECT_EQ(c.reconnect.min, 100ms);
  EXPECT_EQ(c.reconnect.max, 90s);
  EXPECT_EQ(c.reconnect.factor, 1.5);
  EXPECT_EQ(c.delivery, Delivery::exactly_once);
  EXPECT_TRUE(c.checkpoint.enabled);
  EXPECT_EQ(c.checkpoint.topic, "shop.checkpoints");
  EXPECT_EQ(c.checkpoint.interval, 2s);
  EXPECT_EQ(c.kafka.transactional_id, "shop-relay");
  EXPECT_EQ(c.kafka.transaction_interval, 250ms);
  EXPECT_FALSE(c.kafka.send_when_caught_up);
  EXPECT_FALSE(c.kafka.alternate_producers);
  EXPECT_EQ(c.shutdown_timeout, 45s);
  EXPECT_EQ(c.metrics_address, "0.0.0.0:9300");
  EXPECT_EQ(c.metrics_allowed_hosts, std::vector<std::string>{"pgoutbox.shop.svc"});
  EXPECT_EQ(c.metrics_topic_labels, 20U);
  EXPECT_EQ(c.tables[0].topic_pattern, "shop\\.[a-z]+\\.[A-Za-z]+");
  EXPECT_EQ(c.log_format, "json");
  EXPECT_EQ(c.log_level, "debug");
  ASSERT_EQ(c.messages.size(), 1U);
  const MessageConfig& m = c.messages[0];
  EXPECT_EQ(m.prefix, "shop");
  EXPECT_EQ(m.topic, "shop.msg.${agg}");
  EXPECT_EQ(m.topic_pattern, "shop\\.msg\\.[a-z]+");
  EXPECT_EQ(m.fields.id, "event_id");
  EXPECT_EQ(m.fields.aggregate_type, "agg");
  EXPECT_EQ(m.fields.aggregate_id, "key");
  EXPECT_EQ(m.fields.payload, "body");
  EXPECT_EQ(m.fields.type, std::optional<std::string>("kind"));
  EXPECT_FALSE(m.fields.headers);
  EXPECT_EQ(m.format.type, Format::debezium_json);
  EXPECT_FALSE(m.format.schemas);
  EXPECT_TRUE(m.format.expand_json_payload);
  EXPECT_EQ(m.format.source, "/shop/msgs");
  EXPECT_EQ(m.format.event_type, "com.example.msg.${kind}");
  EXPECT_TRUE(m.format.subject_from_key);
}

// The lines of describe() for one key path ("tables[0].topic: ...").
std::string describe_line(const std::string& description, const std::string& path) {
  std::istringstream lines(description);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("  " + path + ": ")) return line;
  }
  return {};
}

// Guards the test above against a key added to the schema but not to kEverything.
TEST(ConfigLoader, EveryKeyInTheSchemaIsCoveredByEveryKeyParsed) {
  const std::string everything = describe(load_yaml(kEverything, kSigningKey));
  const std::string minimal = describe(load_yaml(kMinimal));
  for (const auto& key : schema()) {
    // checkpoint.enabled must stay true with exactly-once, so it is set false in its own test.
    if (!key.in_file || key.secret || key.path == "kafka.properties" || key.path == "tables" ||
        key.path == "messages" || key.path == "postgres.password_file" || key.path == "checkpoint.enabled" ||
        key.path == "checkpoint.signing_key_file")
      continue;
    std::string path = key.path;
    if (path.starts_with("tables[].")) path = "tables[0]." + path.substr(9);
    if (path.starts_with("messages[].")) path = "messages[0]." + path.substr(11);
    const std::string line = describe_line(everything, path);
    ASSERT_FALSE(line.empty()) << path << " is missing from describe()";
    EXPECT_NE(line, describe_line(minimal, path)) << path << " is not set to a non-default value in kEverything";
  }
}

// A CloudEvent needs a type; its source defaults to the database and the table.
TEST(ConfigLoader, ACloudEventsTableNeedsATypeAndGetsASourceNamingTheDatabase) {
  const std::string head = "postgres: {dsn: \"host=pg dbname=shop\"}\nkafka: {brokers: \"k:9092\"}\ntables:\n";
  const Config c = load_yaml(head + "  - table: sales.outbox\n    format: {type: cloudevents-structured}\n");
  EXPECT_EQ(c.tables[0].format.source, "/shop/sales.outbox");
  EXPECT_EQ(c.tables[0].format.type, Format::cloudevents_structured);
  try {
    load_yaml(head + "  - table: outbox\n    columns: {type: null}\n    format: {type: cloudevents-binary}\n");
    FAIL() << "loaded";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "tables[0].format.event_type");
    EXPECT_NE(e.problem().find("needs a type"), std::string::npos) << e.problem();
  }
  EXPECT_EQ(load_yaml(head + "  - table: outbox\n    columns: {type: null}\n    format: {type: cloudevents-binary, "
                             "event_type: \"com.example.${aggregatetype}\"}\n")
                .tables[0]
                .format.event_type,
            "com.example.${aggregatetype}");
}

// The same for a message outbox: the source names the prefix.
TEST(ConfigLoader, ACloudEventsMessageOutboxNeedsATypeAndGetsASourceNamingThePrefix) {
  const std::string head = "postgres: {dsn: \"host=pg dbname=shop\"}\nkafka: {brokers: \"k:9092\"}\nmessages:\n";
  const Config c = load_yaml(head + "  - prefix: orders\n    format: {type: cloudevents-binary}\n");
  EXPECT_EQ(c.messages[0].format.source, "/shop/messages/orders");
  try {
    load_yaml(head + "  - prefix: orders\n    fields: {type: null}\n    format: {type: cloudevents-structured}\n");
    FAIL() << "loaded";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "messages[0].format.event_type");
    EXPECT_NE(e.problem().find("fields.type"), std::string::npos) << e.problem();
  }
  try {
    load_yaml(head + "  - prefix: orders\n    format: {expand_json_payload: true}\n");
    FAIL() << "loaded";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "messages[0].format.expand_json_payload");
  }
}

TEST(ConfigLoader, AMessageOutboxAloneNeedsNoTable) {
  const Config c =
      load_yaml("postgres: {dsn: \"host=pg\"}\nkafka: {brokers: \"k:9092\"}\nmessages:\n  - prefix: outbox\n");
  EXPECT_TRUE(c.tables.empty());
  ASSERT_EQ(c.messages.size(), 1U);
  EXPECT_EQ(c.messages[0].prefix, "outbox");
  EXPECT_EQ(c.messages[0].topic, "outbox.event.${aggregatetype}");
  EXPECT_EQ(c.messages[0].fields.id, "id");
  EXPECT_EQ(c.messages[0].fields.aggregate_id, "aggregateid");
  EXPECT_EQ(c.messages[0].fields.headers, std::optional<std::string>("headers"));
}

TEST(ConfigLoader, MessageOutboxMistakesAreRefused) {
  const std::string base = "postgres: {dsn: \"host=pg\"}\nkafka: {brokers: \"k:9092\"}\n";
  const auto problem = [&](const std::string& yaml) {
    try {
      load_yaml(base + yaml);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(loaded)");
  };
  EXPECT_NE(problem("messages:\n  - topic: t\n").find("messages[0].prefix: is required"), std::string::npos);
  EXPECT_NE(problem("messages:\n  - prefix: a\n  - prefix: a\n").find("messages[1].prefix: names prefix"),
            std::string::npos);
  EXPECT_NE(problem("messages:\n  - prefix: a\n    topic: \"bad topic\"\n").find("messages[0].topic"),
            std::string::npos);
  EXPECT_NE(problem("messages:\n  - prefix: a\n    fields: {idd: x}\n").find("did you mean"), std::string::npos);
  EXPECT_NE(problem("messages: outbox\n").find("must be a list of message outboxes"), std::string::npos);
  EXPECT_NE(problem("").find("must list at least one outbox table"), std::string::npos);
}

TEST(ConfigLoader, MessageOutboxesComeFromTheEnvironmentToo) {
  const Config c = load_string(kMinimal, "config.yaml",
                               Environment{{{"PGOUTBOX_MESSAGES_0_PREFIX", "billing"},
                                            {"PGOUTBOX_MESSAGES_0_FIELDS_AGGREGATE_ID", "account"},
                                            {"PGOUTBOX_MESSAGES_0_FIELDS_HEADERS", "null"}}});
  ASSERT_EQ(c.messages.size(), 1U);
  EXPECT_EQ(c.messages[0].prefix, "billing");
  EXPECT_EQ(c.messages[0].fields.aggregate_id, "account");
  EXPECT_FALSE(c.messages[0].fields.headers);
  EXPECT_THROW(load_string(kMinimal, "config.yaml", Environment{{{"PGOUTBOX_MESSAGES_1_PREFIX", "gap"}}}), ConfigError);
}

TEST(ConfigLoader, TypeColumnWrittenAsNullMeansNoTypeColumn) {
  const Config c = load_yaml(kMinimal + "    columns:\n      type: null\n      headers: \"null\"\n");
  EXPECT_EQ(c.tables[0].columns.type, std::nullopt);
  EXPECT_FALSE(c.tables[0].type_column_explicit);
  EXPECT_EQ(c.tables[0].columns.headers, std::optional<std::string>("null")) << "a quoted null is a column name";
}

TEST(ConfigLoader, AQuotedValueClosedOnALaterLineIsStillYaml) {
  const Config c =
      load_yaml("postgres:\n  dsn: \"host=db\n    dbname=app\"\nkafka:\n  brokers: k\ntables: [{table: t}]\n");
  EXPECT_EQ(c.postgres.dsn, "host=db dbname=app");
}

TEST(ConfigLoader, ASlotNameOfUpTo51BytesTakesABackfillAndAnyLengthWithout) {
  const std::string backfill = "\nkafka: {brokers: k}\ntables: [{table: t, backfill: {where: \"status = 'NEW'\"}}]\n";
  EXPECT_EQ(load_yaml("postgres:\n  dsn: x=y\n  slot: " + std::string(51, 's') + backfill).postgres.slot.size(), 51U);
  EXPECT_EQ(load_yaml("postgres:\n  dsn: x=y\n  slot: " + std::string(63, 's') +
                      "\nkafka: {brokers: k}\ntables: [{table: t}]\n")
                .postgres.slot.size(),
            63U);
}

TEST(ConfigLoader, TheCheckpointCanBeTurnedOffInAtLeastOnceMode) {
  const Config c = load_yaml(kMinimal + "checkpoint:\n  enabled: false\n");
  EXPECT_FALSE(c.checkpoint.enabled);
  EXPECT_EQ(c.delivery, Delivery::at_least_once);
}

TEST(ConfigLoader, EmptySectionsKeepDefaults) {
  const Config c = load_yaml(kMinimal + "limits:\nreconnect:\n");
  EXPECT_EQ(c.limits.max_in_flight_records, 20'000U);
  EXPECT_EQ(c.reconnect.max, 30s);
}

TEST(ConfigLoader, DurationsAndSizes) {
  const auto with = [](const std::string& key, const std::string& value) {
    return load_yaml(kMinimal + key + ": " + value + "\n");
  };
  EXPECT_EQ(with("shutdown_timeout", "1m30s").shutdown_timeout, 90s);
  EXPECT_EQ(with("shutdown_timeout", "2h").shutdown_timeout, 2h);
  EXPECT_EQ(with("shutdown_timeout", "1500ms").shutdown_timeout, 1500ms);
  const auto bytes = [](const std::string& value) {
    return load_yaml(kMinimal + "limits:\n  max_in_flight_bytes: " + value + "\n").limits.max_in_flight_bytes;
  };
  EXPECT_EQ(bytes("1048576"), 1048576U);
  EXPECT_EQ(bytes("512KiB"), 512U << 10);
  EXPECT_EQ(bytes("1 GiB"), 1ULL << 30);
  EXPECT_EQ(bytes("100B"), 100U);
}

// Issue 19 item 8: a cap too large to be reached is no backpressure; the producer's queue
// properties are bounded the same way. Each is a configuration error naming the key.
TEST(ConfigLoader, CapsAndQueueSizesHaveCeilings) {
  const auto fails = [](const std::string& yaml, const std::string& says) {
    try {
      load_yaml(kMinimal + yaml);
      ADD_FAILURE() << "accepted: " << yaml;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  fails("limits:\n  max_in_flight_bytes: 1TiB\n", "limits.max_in_flight_bytes: must be at most 1GiB");
  fails("limits:\n  max_in_flight_records: 18446744073709551615\n",
        "limits.max_in_flight_records: must be at most 1000000");
  fails("limits:\n  max_in_flight_records: 1000001\n", "must be at most 1000000");
  const std::string head = "postgres:\n  dsn: host=db dbname=app user=pgoutbox\n";
  const std::string table = "tables:\n  - table: public.outbox\n";
  const auto fails_whole = [](const std::string& yaml, const std::string& says) {
    try {
      load_yaml(yaml);
      ADD_FAILURE() << "accepted: " << yaml;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  fails_whole(
      head + table + "kafka:\n  brokers: k:9092\n  properties:\n    queue.buffering.max.messages: 99999999999\n",
      "kafka.properties.queue.buffering.max.messages: must be a whole number from 1 to 10000000");
  fails_whole(head + table + "kafka:\n  brokers: k:9092\n  properties:\n    queue.buffering.max.kbytes: lots\n",
              "queue.buffering.max.kbytes: must be a whole number");
  fails("metrics_topic_labels: 1000000\n", "metrics_topic_labels: must be at most 10000");
  fails_whole(head + "kafka:\n  brokers: k:9092\ntables:\n  - table: t\n    topic_pattern: \"([a-z\"\n",
              "topic_pattern: is not a valid regular expression");
  EXPECT_EQ(load_yaml(kMinimal + "limits:\n  max_in_flight_records: 1000000\n").limits.max_in_flight_records,
            1'000'000U);
}

struct TableNameCase {
  std::string written;
  std::string schema;
  std::string name;
};

void PrintTo(const TableNameCase& c, std::ostream* os) { *os << c.written; }

class TableNames : public ::testing::TestWithParam<TableNameCase> {};

TEST_P(TableNames, FollowPostgresIdentifierRules) {
  const auto& param = GetParam();
  const Config c =
      load_yaml("postgres: {dsn: host=db}\nkafka: {brokers: k}\ntables:\n  - table: '" + param.written + "'\n");
  EXPECT_EQ(c.tables[0].schema, param.schema);
  EXPECT_EQ(c.tables[0].name, param.name);
}

INSTANTIATE_TEST_SUITE_P(
    Config, TableNames,
    ::testing::Values(TableNameCase{"outbox", "public", "outbox"}, TableNameCase{"app.outbox", "app", "outbox"},
                      TableNameCase{"Sales.Orders", "sales", "orders"},
                      TableNameCase{"\"Sales\".\"Order Events\"", "Sales", "Order Events"},
                      TableNameCase{"\"my.schema\".\"a\"\"b\"", "my.schema", "a\"b"},
                      TableNameCase{" app . outbox ", "app", "outbox"},
                      TableNameCase{"app.\"Outbox\"", "app", "Outbox"}, TableNameCase{"\"Outbox\"", "public", "Outbox"},
                      TableNameCase{"_t$1", "public", "_t$1"}, TableNameCase{"Café.Übersicht", "café", "Übersicht"}));

// Each case: the YAML, then where the error points and what it must say.
struct ErrorCase {
  std::string label;
  std::string yaml;
  int line;
  int column;
  std::string key;
  std::string says;
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.label; }

class LoaderErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(LoaderErrors, NameFileKeyLineAndWhatIsAllowed) {
  const auto& param = GetParam();
  const ConfigError e = error_of(param.yaml);
  EXPECT_EQ(e.where(), "config.yaml");
  EXPECT_EQ(e.line(), param.line) << e.what();
  EXPECT_EQ(e.column(), param.column) << e.what();
  EXPECT_EQ(e.key(), param.key) << e.what();
  EXPECT_NE(e.problem().find(param.says), std::string::npos) << e.what();
  std::string prefix = "config.yaml";
  if (param.line > 0) prefix += ":" + std::to_string(param.line) + ":" + std::to_string(param.column);
  EXPECT_TRUE(std::string(e.what()).starts_with(prefix + ": " + (param.key.empty() ? "" : param.key + ": ")))
      << e.what();
}

const std::string kHead =
    "postgres:\n  dsn: host=db\nkafka:\n  brokers: k:9092\ntables:\n  - table: outbox\n";  // 6 lines

INSTANTIATE_TEST_SUITE_P(
    Config, LoaderErrors,
    ::testing::Values(
        ErrorCase{"ratio_above_1", kHead + "limits:\n  resume_ratio: 1.5\n", 8, 17, "limits.resume_ratio",
                  "must be between 0 and 1, both excluded (got 1.5)"},
        ErrorCase{"ratio_0", kHead + "limits:\n  resume_ratio: 0\n", 8, 17, "limits.resume_ratio", "between 0 and 1"},
        ErrorCase{"records_0", kHead + "limits:\n  max_in_flight_records: 0\n", 8, 26, "limits.max_in_flight_records",
                  "greater than 0"},
        ErrorCase{"records_text", kHead + "limits:\n  max_in_flight_records: lots\n", 8, 26,
                  "limits.max_in_flight_records", "whole number (got 'lots')"},
        ErrorCase{"bytes_decimal_unit", kHead + "limits:\n  max_in_flight_bytes: 64MB\n", 8, 24,
                  "limits.max_in_flight_bytes", "binary units KiB, MiB, GiB"},
        ErrorCase{"bytes_negative", kHead + "limits:\n  max_in_flight_bytes: -1\n", 8, 24, "limits.max_in_flight_bytes",
                  "e.g. 64MiB (got '-1')"},
        ErrorCase{"bytes_overflow", kHead + "limits:\n  max_in_flight_bytes: 99999999999GiB\n", 8, 24,
                  "limits.max_in_flight_bytes", "too large"},
        ErrorCase{"factor_below_1", kHead + "reconnect:\n  factor: 0.5\n", 8, 11, "reconnect.factor",
                  "at least 1 (got 0.5)"},
        ErrorCase{"factor_nan", kHead + "reconnect:\n  factor: .nan\n", 8, 11, "reconnect.factor", "must be a number"},
        ErrorCase{"min_above_max", kHead + "reconnect:\n  min: 1m\n  max: 30s\n", 8, 8, "reconnect.min",
                  "must not exceed reconnect.max (30s) (got 1m)"},
        ErrorCase{"min_above_default_max", kHead + "reconnect:\n  min: 2m\n", 8, 8, "reconnect.min",
                  "must not exceed reconnect.max (30s)"},
        ErrorCase{"duration_no_unit", kHead + "shutdown_timeout: 10\n", 7, 19, "shutdown_timeout",
                  "has no unit; write a duration with a unit such as 500ms, 10s, 5m or 1h"},
        ErrorCase{"duration_zero", kHead + "shutdown_timeout: 0s\n", 7, 19, "shutdown_timeout",
                  "must be longer than 0"},
        ErrorCase{"duration_fraction", kHead + "shutdown_timeout: 1.5s\n", 7, 19, "shutdown_timeout",
                  "whole numbers (1500ms, not 1.5s)"},
        ErrorCase{"duration_unknown_unit", "postgres:\n  dsn: host=db\n  status_interval: 3d\n", 3, 20,
                  "postgres.status_interval", "unknown unit 'd'"},
        ErrorCase{"duration_too_long", kHead + "shutdown_timeout: 9000h\n", 7, 19, "shutdown_timeout",
                  "longer than a year"},
        ErrorCase{"log_level", kHead + "log_level: warning\n", 7, 12, "log_level",
                  "must be one of trace, debug, info, warn, error (got 'warning'); did you mean warn?"},
        ErrorCase{"log_format", kHead + "log_format: xml\n", 7, 13, "log_format",
                  "must be one of auto, json, text (got 'xml')"},
        ErrorCase{"null_payload", kHead + "    null_payload: drop\n", 7, 19, "tables[0].null_payload",
                  "one of poison, tombstone, json-null (got 'drop')"},
        ErrorCase{"bool", kHead + "provenance_headers: maybe\n", 7, 21, "provenance_headers",
                  "must be true or false (got 'maybe')"},
        ErrorCase{"metrics_no_port", kHead + "metrics_address: localhost\n", 7, 18, "metrics_address", "has no port"},
        ErrorCase{"metrics_port_range", kHead + "metrics_address: localhost:70000\n", 7, 18, "metrics_address",
                  "port between 1 and 65535"},
        ErrorCase{"metrics_ipv6", kHead + "metrics_address: ::1:8432\n", 7, 18, "metrics_address",
                  "IPv6 host without brackets"},
        ErrorCase{"slot_name", "postgres:\n  slot: Bad-Slot\n", 2, 9, "postgres.slot",
                  "only lower case letters, digits and '_' (got 'Bad-Slot')"},
        ErrorCase{"slot_null", "postgres:\n  slot:\n", 2, 3, "postgres.slot",
                  "has no value; leave the key out to use the default (pgoutbox)"},
        ErrorCase{"slot_list", "postgres:\n  slot: [a, b]\n", 2, 9, "postgres.slot", "must be a slot name, not a list"},
        ErrorCase{"publication_long", "postgres:\n  publication: " + std::string(64, 'p') + "\n", 2, 16,
                  "postgres.publication", "longer than 63 bytes"},
        ErrorCase{"application_name", "postgres:\n  application_name: \"caf\\u00e9\"\n", 2, 21,
                  "postgres.application_name", "printable ASCII"},
        ErrorCase{"brokers_empty_entry", "kafka:\n  brokers: \"a:9092,,b:9092\"\n", 2, 12, "kafka.brokers",
                  "has an empty entry"},
        ErrorCase{"topic_unterminated", kHead + "    topic: outbox.${aggregatetype\n", 7, 12, "tables[0].topic",
                  "unterminated ${ at position 8"},
        ErrorCase{"topic_empty_ref", kHead + "    topic: outbox.${}\n", 7, 12, "tables[0].topic",
                  "empty ${} at position 8"},
        ErrorCase{"topic_dollar", kHead + "    topic: outbox.$type\n", 7, 12, "tables[0].topic",
                  "'$' at position 8 that does not start"},
        ErrorCase{"topic_char", kHead + "    topic: \"outbox events\"\n", 7, 12, "tables[0].topic",
                  "has ' ' at position 7; Kafka topics allow only"},
        ErrorCase{"topic_nested", kHead + "    topic: \"a.${x${y}}\"\n", 7, 12, "tables[0].topic",
                  "'$' or '{' inside the reference"},
        ErrorCase{"topic_spaces", kHead + "    topic: \"a.${ x }\"\n", 7, 12, "tables[0].topic",
                  "spaces around the column name"},
        ErrorCase{"topic_dot", kHead + "    topic: \".\"\n", 7, 12, "tables[0].topic", "'.' or '..'"},
        ErrorCase{"second_table_column", kHead + "  - table: b\n    columns:\n      payload: \"\"\n", 9, 16,
                  "tables[1].columns.payload", "must name a column"},
        ErrorCase{"table_unterminated", "tables:\n  - table: '\"Sales'\n", 2, 12, "tables[0].table",
                  "unterminated quoted identifier"},
        ErrorCase{"table_three_parts", "tables:\n  - table: db.app.outbox\n", 2, 12, "tables[0].table",
                  "more than two parts"},
        ErrorCase{"table_trailing_dot", "tables:\n  - table: app.\n", 2, 12, "tables[0].table", "ends with a dot"},
        ErrorCase{"table_empty_quoted", "tables:\n  - table: '\"\"'\n", 2, 12, "tables[0].table",
                  "empty quoted identifier"},
        ErrorCase{"table_space", "tables:\n  - table: order events\n", 2, 12, "tables[0].table",
                  "has 'e' after a name"},
        ErrorCase{"table_digit", "tables:\n  - table: 1outbox\n", 2, 12, "tables[0].table",
                  "has '1' where a name should start"},
        ErrorCase{"table_long", "tables:\n  - table: " + std::string(64, 't') + "\n", 2, 12, "tables[0].table",
                  "longer than 63 bytes"},
        ErrorCase{"table_twice", kHead + "  - table: '\"outbox\"'\n", 7, 12, "tables[1].table",
                  "names public.outbox again (already tables[0])"},
        ErrorCase{"table_missing", kHead + "  - topic: x\n", 7, 5, "tables[1].table",
                  "is required; set it in the file or in PGOUTBOX_TABLES_1_TABLE"},
        ErrorCase{"tables_not_list", "postgres: {dsn: x=y}\nkafka: {brokers: k}\ntables: public.outbox\n", 3, 9,
                  "tables", "must be a list of tables"},
        ErrorCase{"table_item_scalar", "tables:\n  - public.outbox\n", 2, 5, "tables[0]",
                  "must be a map with at least table:, not a single value"},
        ErrorCase{"tables_empty", "postgres: {dsn: x=y}\nkafka: {brokers: k}\ntables: []\n", 3, 9, "tables",
                  "must list at least one outbox table"},
        ErrorCase{"tables_missing", "postgres: {dsn: x=y}\nkafka: {brokers: k}\n", 0, 0, "tables",
                  "must list at least one outbox table"},
        ErrorCase{"dsn_missing", "kafka: {brokers: k}\n", 0, 0, "postgres.dsn",
                  "is required; set it in the file or in PGOUTBOX_POSTGRES_DSN"},
        ErrorCase{"dsn_empty", "postgres:\n  dsn: \"\"\n", 2, 8, "postgres.dsn", "must not be empty"},
        ErrorCase{"dsn_malformed", "postgres:\n  dsn: \"host=db port\"\n", 2, 8, "postgres.dsn",
                  "is malformed: a keyword is not followed by '=' (at character 9)"},
        ErrorCase{"brokers_missing", "postgres: {dsn: x=y}\n", 0, 0, "kafka.brokers", "PGOUTBOX_KAFKA_BROKERS"},
        ErrorCase{"section_scalar", "postgres: yes\n", 1, 11, "postgres", "must be a map of keys, not a single value"},
        ErrorCase{"top_level_list", "- a\n- b\n", 1, 1, "", "the top level must be a map of keys, not a list"},
        ErrorCase{"duplicate_key", "postgres:\n  slot: a\n  slot: b\n", 3, 3, "postgres.slot", "is given twice"},
        ErrorCase{"invalid_yaml", "postgres:\n  dsn: [unclosed\nkafka: {}\n", 3, 6, "", "not valid YAML"},
        ErrorCase{"tab_indent", "postgres:\n\tdsn: host=db\n", 2, 1, "",
                  "tabs are not allowed for indentation; indent with spaces"},
        ErrorCase{"tab_after_spaces", kHead + "  \t topic: t\n", 7, 3, "", "tabs are not allowed for indentation"},
        ErrorCase{"unclosed_double_quote", "postgres:\n  dsn: \"host=db\nkafka:\n  brokers: k\ntables: [{table: t}]\n",
                  2, 8, "", "the quote (\") opened here is not closed; close it on this line"},
        ErrorCase{"unclosed_single_quote_at_the_end", kHead + "    topic: 'it''s\n", 7, 12, "",
                  "the quote (') opened here is not closed"},
        ErrorCase{"password_in_file", "postgres:\n  password: x\n", 2, 3, "postgres.password",
                  "is a secret and is not read from the configuration file; set PGOUTBOX_POSTGRES_PASSWORD or "
                  "postgres.password_file"},
        ErrorCase{"properties_scalar", "kafka:\n  properties: linger.ms=5\n", 2, 15, "kafka.properties",
                  "must be a map of librdkafka property names"},
        ErrorCase{"property_list", "kafka:\n  properties:\n    linger.ms: [5]\n", 3, 16, "kafka.properties.linger.ms",
                  "must be a string, not a list"},
        ErrorCase{"property_null", "kafka:\n  properties:\n    linger.ms:\n", 3, 5, "kafka.properties.linger.ms",
                  "has no value"},
        ErrorCase{"idempotence",
                  "postgres: {dsn: x=y}\nkafka:\n  brokers: k\n  properties:\n    enable.idempotence: false\ntables: "
                  "[{table: t}]\n",
                  5, 25, "kafka.properties.enable.idempotence", "must stay true"},
        ErrorCase{"acks",
                  "postgres: {dsn: x=y}\nkafka:\n  brokers: k\n  properties:\n    acks: 1\ntables: [{table: t}]\n", 5,
                  11, "kafka.properties.acks", "must stay all (or -1)"},
        ErrorCase{"delivery_timeout",
                  "postgres: {dsn: x=y}\nkafka:\n  brokers: k\n  properties:\n    delivery.timeout.ms: 30000\ntables: "
                  "[{table: t}]\n",
                  5, 26, "kafka.properties.delivery.timeout.ms", "must stay 0 (no timeout)"},
        ErrorCase{"required_acks_alias",
                  "postgres: {dsn: x=y}\nkafka:\n  brokers: k\n  properties:\n    request.required.acks: 1\ntables: "
                  "[{table: t}]\n",
                  5, 28, "kafka.properties.request.required.acks", "must stay all (or -1)"},
        // Issue 12 #6: librdkafka's queue below the in-flight caps would stall sending.
        ErrorCase{"queue_messages_below_cap",
                  "postgres: {dsn: x=y}\nkafka:\n  brokers: k\n  properties:\n    queue.buffering.max.messages: "
                  "100\nlimits: {max_in_flight_records: 500}\ntables: [{table: t}]\n",
                  5, 35, "kafka.properties.queue.buffering.max.messages",
                  "must hold at least limits.max_in_flight_records (500)"},
        ErrorCase{"queue_kbytes_below_cap",
                  "postgres: {dsn: x=y}\nkafka:\n  brokers: k\n  properties:\n    queue.buffering.max.kbytes: "
                  "1024\ntables: [{table: t}]\n",
                  5, 33, "kafka.properties.queue.buffering.max.kbytes",
                  "must hold at least limits.max_in_flight_bytes (16384 KiB)"},
        // Issue 14: what contradicts exactly-once is refused naming the key.
        ErrorCase{"transactional_id_property",
                  "postgres: {dsn: x=y}\nkafka:\n  brokers: k\n  properties:\n    transactional.id: t1\n"
                  "delivery: exactly-once\ntables: [{table: t}]\n",
                  5, 23, "kafka.properties.transactional.id", "use delivery: exactly-once, and kafka.transactional_id"},
        // Issue 37 item 6: an explicit id that could be a derived one, or another's -alt or -check.
        ErrorCase{"transactional_id_in_the_derived_namespace",
                  "postgres: {dsn: x=y}\nkafka: {brokers: k, transactional_id: pgoutbox-7-shop-foo}\ntables: [{table: "
                  "t}]\n",
                  2, 39, "kafka.transactional_id", "begins like the ids pgoutbox derives from a slot"},
        ErrorCase{"transactional_id_like_an_alternate",
                  "postgres: {dsn: x=y}\nkafka: {brokers: k, transactional_id: orders-alt}\ntables: [{table: t}]\n", 2,
                  39, "kafka.transactional_id", "ends with -alt"},
        ErrorCase{"transactional_id_like_a_probe",
                  "postgres: {dsn: x=y}\nkafka: {brokers: k, transactional_id: orders-check}\ntables: [{table: t}]\n",
                  2, 39, "kafka.transactional_id", "ends with -check"},
        // Issue 25: an unsigned checkpoint could be forged, and exactly-once relies on skipping.
        ErrorCase{"exactly_once_without_a_signing_key",
                  "postgres: {dsn: x=y}\nkafka: {brokers: k}\ndelivery: exactly-once\ntables: [{table: t}]\n", 3, 11,
                  "delivery", "exactly-once needs a checkpoint signing key"},
        // Issue 25: a row must not route itself into the checkpoint or dead-letter topic.
        ErrorCase{"template_reaches_the_checkpoint_topic",
                  "postgres: {dsn: x=y}\nkafka: {brokers: k}\ntables: [{table: t, topic: \"${aggregatetype}\"}]\n", 3,
                  28, "tables[0].topic", "can route a row into pgoutbox.checkpoints"},
        ErrorCase{"message_template_reaches_the_dead_letter_topic",
                  "postgres: {dsn: x=y}\nkafka: {brokers: k}\npoison: {dead_letter_topic: dlq.orders}\n"
                  "messages: [{prefix: p, topic: \"dlq.${t}\"}]\n",
                  4, 31, "messages[0].topic", "can route a row into dlq.orders"},
        ErrorCase{"exactly_once_without_checkpoint",
                  "postgres: {dsn: x=y}\nkafka: {brokers: k}\ndelivery: exactly-once\ncheckpoint: {enabled: false}\n"
                  "tables: [{table: t}]\n",
                  4, 23, "checkpoint.enabled", "must be true with delivery: exactly-once"},
        // The backfill's marker slots are the slot's name plus "_backfilling": 51 bytes at most.
        ErrorCase{"slot_too_long_for_the_backfill_markers",
                  "postgres:\n  dsn: x=y\n  slot: " + std::string(52, 's') +
                      "\nkafka: {brokers: k}\ntables: [{table: t, backfill: {where: \"status = 'NEW'\"}}]\n",
                  3, 9, "postgres.slot", "must be at most 51 bytes with tables[0].backfill.where set"},
        ErrorCase{"checkpoint_topic_is_the_dead_letter_topic",
                  "postgres: {dsn: x=y}\nkafka: {brokers: k}\ncheckpoint: {topic: pgoutbox.dead-letter}\n"
                  "tables: [{table: t}]\n",
                  3, 21, "checkpoint.topic", "must differ from poison.dead_letter_topic"},
        ErrorCase{"delivery_unknown",
                  "postgres: {dsn: x=y}\nkafka: {brokers: k}\ndelivery: exactly_once\ntables: [{table: t}]\n", 3, 11,
                  "delivery", "exactly-once"},
        ErrorCase{"bootstrap",
                  "postgres: {dsn: x=y}\nkafka:\n  brokers: k\n  properties:\n    bootstrap.servers: b:9092\ntables: "
                  "[{table: t}]\n",
                  5, 24, "kafka.properties.bootstrap.servers", "duplicates kafka.brokers"},
        ErrorCase{
            "non_secret_file_variant",
            "postgres: {dsn: x=y}\nkafka:\n  brokers: k\n  properties:\n    linger.ms_file: /x\ntables: [{table: t}]\n",
            5, 21, "kafka.properties.linger.ms_file", "only secret properties are read from files"}),
    [](const auto& test_case) { return test_case.param.label; });

struct UnknownKeyCase {
  std::string label;
  std::string yaml;
  std::string key;
  std::string says;
};

void PrintTo(const UnknownKeyCase& c, std::ostream* os) { *os << c.label; }

class UnknownKeys : public ::testing::TestWithParam<UnknownKeyCase> {};

TEST_P(UnknownKeys, AreErrorsWithASuggestion) {
  const auto& param = GetParam();
  const ConfigError e = error_of(param.yaml);
  EXPECT_EQ(e.key(), param.key) << e.what();
  EXPECT_NE(e.problem().find(param.says), std::string::npos) << e.what();
  EXPECT_GT(e.line(), 0) << e.what();
}

INSTANTIATE_TEST_SUITE_P(
    Config, UnknownKeys,
    ::testing::Values(
        UnknownKeyCase{"typo", "postgres:\n  slto: a\n", "postgres.slto", "unknown key; did you mean postgres.slot?"},
        UnknownKeyCase{"swap", "postgres:\n  dns: a\n", "postgres.dns", "did you mean postgres.dsn?"},
        UnknownKeyCase{"camel_case", "limits:\n  maxInFlightBytes: 1\n", "limits.maxInFlightBytes",
                       "did you mean limits.max_in_flight_bytes?"},
        UnknownKeyCase{"kebab_case", "shutdown-timeout: 1s\n", "shutdown-timeout", "did you mean shutdown_timeout?"},
        UnknownKeyCase{"wrong_section", "slot: a\n", "slot", "unknown key here; did you mean postgres.slot?"},
        UnknownKeyCase{"in_table", "tables:\n  - table: t\n    colums: {}\n", "tables[0].colums",
                       "did you mean tables[0].columns?"},
        UnknownKeyCase{"in_columns", "tables:\n  - table: t\n    columns:\n      aggregateid: k\n",
                       "tables[0].columns.aggregateid", "did you mean tables[0].columns.aggregate_id?"},
        UnknownKeyCase{"column_in_table", "tables:\n  - table: t\n    payload: body\n", "tables[0].payload",
                       "did you mean tables[].columns.payload?"},
        UnknownKeyCase{
            "nothing_close", "colour: red\n", "colour",
            "unknown key; the top level takes postgres, kafka, tables, messages, provenance_headers, limits, "
            "reconnect, poison, delivery, checkpoint, shutdown_timeout, "
            "metrics_address, metrics_allowed_hosts, metrics_topic_labels, log_format, log_level"},
        UnknownKeyCase{"nothing_close_in_section", "reconnect:\n  jitter: 1\n", "reconnect.jitter",
                       "unknown key; reconnect takes min, max, factor"}),
    [](const auto& test_case) { return test_case.param.label; });

TEST(ConfigLoader, MissingFileNamesIt) {
  try {
    load("/nonexistent/pgoutbox.yaml", Environment{});
    FAIL() << "loaded a missing file";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.where(), "/nonexistent/pgoutbox.yaml");
    EXPECT_NE(std::string(e.what()).find("cannot open the configuration file: No such file or directory"),
              std::string::npos)
        << e.what();
  }
}

TEST(ConfigLoader, LoadReadsAFile) {
  test::ScratchDir dir;
  const std::string path = dir.write("pgoutbox.yaml", kMinimal + "log_level: warn\n");
  const Config c = load(path, Environment{});
  EXPECT_EQ(c.source, path);
  EXPECT_EQ(c.log_level, "warn");
}

// The names the metrics server answers as Host besides addresses and localhost (DNS rebinding,
// SECURITY.md): compared without case and without a final dot, so kept that way; a port, a
// wildcard or an empty entry is refused.
TEST(ConfigLoader, MetricsAllowedHostsAreNamesWithoutAPort) {
  EXPECT_TRUE(load_yaml(kMinimal).metrics_allowed_hosts.empty());
  const Config c = load_yaml(std::string(kMinimal) + "metrics_allowed_hosts: \"Pgoutbox, pgoutbox.monitoring.svc.\"\n");
  EXPECT_EQ(c.metrics_allowed_hosts, (std::vector<std::string>{"pgoutbox", "pgoutbox.monitoring.svc"}));
  EXPECT_NE(describe(c).find("metrics_allowed_hosts: pgoutbox, pgoutbox.monitoring.svc"), std::string::npos)
      << describe(c);
  const Config env = load_yaml(kMinimal, {{"PGOUTBOX_METRICS_ALLOWED_HOSTS", "pgoutbox_relay"}});
  EXPECT_EQ(env.metrics_allowed_hosts, (std::vector<std::string>{"pgoutbox_relay"}));
  for (const std::string value : {"pgoutbox:8432", "*.example.com", "a,,b", "http://pgoutbox", "[::1]"}) {
    const ConfigError e = error_of(std::string(kMinimal) + "metrics_allowed_hosts: \"" + value + "\"\n");
    EXPECT_EQ(e.key(), "metrics_allowed_hosts") << value;
  }
  EXPECT_NE(error_of(std::string(kMinimal) + "metrics_allowed_hosts: \"pgoutbox:8432\"\n").problem().find("port"),
            std::string::npos);
}

TEST(ConfigLoader, ExampleConfigLoads) {
  const Config c = load(PGOUTBOX_EXAMPLE_CONFIG, Environment{});
  EXPECT_EQ(c.postgres.dsn, "host=127.0.0.1 port=5432 dbname=app user=pgoutbox");
  EXPECT_EQ(c.kafka.brokers, "127.0.0.1:9092");
  EXPECT_EQ(c.kafka.properties.at("linger.ms"), "5");
  ASSERT_EQ(c.tables.size(), 1U);
  EXPECT_EQ(c.tables[0].name, "outbox");
  EXPECT_TRUE(c.tables[0].type_column_explicit);
  EXPECT_EQ(c.metrics_address, "127.0.0.1:8432");
}

// The example writes most keys with their default values and says so; it must not lie.
TEST(ConfigLoader, ExampleConfigStatesTheDefaults) {
  const std::string example = describe(load(PGOUTBOX_EXAMPLE_CONFIG, Environment{}));
  const std::string same_required =
      describe(load_string("postgres: {dsn: host=127.0.0.1 port=5432 dbname=app user=pgoutbox}\nkafka: {brokers: "
                           "\"127.0.0.1:9092\"}\ntables: [{table: public.outbox}]\n",
                           PGOUTBOX_EXAMPLE_CONFIG, Environment{}));
  for (const auto& key : schema()) {
    if (key.path == "kafka.properties" || key.path == "metrics_address") continue;  // the example sets these on purpose
    std::string path = key.path;
    if (path.starts_with("tables[].")) path = "tables[0]." + path.substr(9);
    EXPECT_EQ(describe_line(example, path), describe_line(same_required, path)) << path;
  }
}

TEST(ConfigLoader, ExampleConfigDocumentsEveryKey) {
  std::ifstream in(PGOUTBOX_EXAMPLE_CONFIG);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& key : schema()) {
    const std::string leaf = key.path.substr(key.path.rfind('.') + 1);
    const std::string needle = key.in_file ? leaf + ":" : key.env;
    EXPECT_NE(text.find(needle), std::string::npos) << key.path << ": the example does not mention " << needle;
  }
}

}  // namespace
}  // namespace pgoutbox::config
