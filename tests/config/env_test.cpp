// PGOUTBOX_* environment overrides over the file, and their errors.

#include <gtest/gtest.h>

#include <cstdlib>

#include "config_test_util.h"

namespace pgoutbox::config {
namespace {

using namespace std::chrono_literals;
using test::error_of;
using test::kMinimal;
using test::load_yaml;

TEST(ConfigEnv, ScalarsOverrideTheFile) {
  const Config c =
      load_yaml(kMinimal + "log_level: debug\nmetrics_address: 127.0.0.1:8432\nlimits:\n  max_in_flight_bytes: 1MiB\n",
                {{"PGOUTBOX_POSTGRES_DSN", "host=other dbname=app"},
                 {"PGOUTBOX_POSTGRES_CREATE_SLOT", "false"},
                 {"PGOUTBOX_POSTGRES_STATUS_INTERVAL", "3s"},
                 {"PGOUTBOX_LIMITS_MAX_IN_FLIGHT_BYTES", "1GiB"},
                 {"PGOUTBOX_LIMITS_RESUME_RATIO", "0.8"},
                 {"PGOUTBOX_RECONNECT_MIN", "1s"},
                 {"PGOUTBOX_LOG_LEVEL", "error"},
                 {"PGOUTBOX_METRICS_ADDRESS", ""},
                 {"PGOUTBOX_PROVENANCE_HEADERS", "true"}});
  EXPECT_EQ(c.postgres.dsn, "host=other dbname=app");
  EXPECT_FALSE(c.postgres.create_slot);
  EXPECT_EQ(c.postgres.status_interval, 3s);
  EXPECT_EQ(c.limits.max_in_flight_bytes, 1ULL << 30);
  EXPECT_EQ(c.limits.resume_ratio, 0.8);
  EXPECT_EQ(c.reconnect.min, 1s);
  EXPECT_EQ(c.log_level, "error");
  EXPECT_EQ(c.metrics_address, "") << "an empty value is null, which turns metrics off";
  EXPECT_TRUE(c.provenance_headers);
}

TEST(ConfigEnv, EverythingFromTheEnvironmentAlone) {
  const Config c = load_yaml("", {{"PGOUTBOX_POSTGRES_DSN", "postgresql://relay@db/app"},
                                  {"PGOUTBOX_KAFKA_BROKERS", "k1:9092,k2:9092"},
                                  {"PGOUTBOX_TABLES_0_TABLE", "app.outbox"},
                                  {"PGOUTBOX_TABLES_1_TABLE", "\"Billing\".events"},
                                  {"PGOUTBOX_TABLES_1_TOPIC", "billing.${aggregatetype}"}});
  EXPECT_EQ(c.postgres.dsn, "postgresql://relay@db/app");
  EXPECT_EQ(c.kafka.brokers, "k1:9092,k2:9092");
  ASSERT_EQ(c.tables.size(), 2U);
  EXPECT_EQ(c.tables[0].schema, "app");
  EXPECT_EQ(c.tables[0].topic, "outbox.event.${aggregatetype}");
  EXPECT_EQ(c.tables[1].schema, "Billing");
  EXPECT_EQ(c.tables[1].name, "events");
  EXPECT_EQ(c.tables[1].topic, "billing.${aggregatetype}");
}

TEST(ConfigEnv, ListEntriesByIndex) {
  const Config c = load_yaml(kMinimal + "  - table: second\n    columns:\n      type: kind\n",
                             {{"PGOUTBOX_TABLES_0_TOPIC", "events"},
                              {"PGOUTBOX_TABLES_0_COLUMNS_PAYLOAD", "body"},
                              {"PGOUTBOX_TABLES_0_COLUMNS_HEADERS", "trace_headers"},
                              {"PGOUTBOX_TABLES_0_COLUMNS_TYPE", "event_type"},
                              {"PGOUTBOX_TABLES_0_NULL_PAYLOAD", "tombstone"},
                              {"PGOUTBOX_TABLES_1_COLUMNS_TYPE", "null"},
                              {"PGOUTBOX_TABLES_1_TABLE", "third"}});
  ASSERT_EQ(c.tables.size(), 2U);
  EXPECT_EQ(c.tables[0].topic, "events");
  EXPECT_EQ(c.tables[0].columns.payload, "body");
  EXPECT_EQ(c.tables[0].columns.headers, std::optional<std::string>("trace_headers"));
  EXPECT_EQ(c.tables[0].columns.type, std::optional<std::string>("event_type"));
  EXPECT_TRUE(c.tables[0].type_column_explicit);
  EXPECT_EQ(c.tables[0].null_payload, NullPayload::tombstone);
  EXPECT_EQ(c.tables[1].name, "third");
  EXPECT_EQ(c.tables[1].columns.type, std::nullopt);
  EXPECT_FALSE(c.tables[1].type_column_explicit);
}

TEST(ConfigEnv, KafkaProperties) {
  const Config c = load_yaml(
      "kafka:\n  brokers: k\n  properties:\n    linger.ms: 5\n    sasl.password_file: /nonexistent/never-read\n" +
          kMinimal.substr(kMinimal.find("tables:")) + "postgres: {dsn: host=db}\n",
      {{"PGOUTBOX_KAFKA_PROPERTY_LINGER_MS", "10"},
       {"PGOUTBOX_KAFKA_PROPERTY_SASL_PASSWORD", "kafka-secret"},
       {"PGOUTBOX_KAFKA_PROPERTY_SECURITY_PROTOCOL", "SASL_SSL"},
       {"PGOUTBOX_KAFKA_PROPERTY_LOG_LEVEL", "7"},
       {"PGOUTBOX_KAFKA_PROPERTY_ENABLE_IDEMPOTENCE", "true"}});
  EXPECT_EQ(c.kafka.properties, (std::map<std::string, std::string>{{"enable.idempotence", "true"},
                                                                    {"linger.ms", "10"},
                                                                    {"log_level", "7"},
                                                                    {"sasl.password", "kafka-secret"},
                                                                    {"security.protocol", "SASL_SSL"}}))
      << "the environment's sasl.password replaces the file's sasl.password_file, which is then not read";
}

TEST(ConfigEnv, OtherToolsVariablesAreLeftAlone) {
  // The test harness and demo use these; they are not configuration.
  const Config c = load_yaml(kMinimal, {{"PGOUTBOX_PG_DSN", "host=x"},
                                        {"PGOUTBOX_KAFKA_BOOTSTRAP", "k:1"},
                                        {"PGOUTBOX_KEEP_SCRATCH", "1"},
                                        {"PGOUTBOX_PG_BINDIR", "/usr/lib/postgresql/15/bin"},
                                        {"PGOUTBOX_KAFKA_LIBS", "/x"},
                                        {"PGOUTBOX_KAFKA_LOG", "/x"},
                                        {"PGOUTBOX_KAFKA_LOG4J", "/x"},
                                        {"PGOUTBOX_PG_LOG", "/x"},
                                        {"PGOUTBOX_JAVA", "/x"},
                                        {"HOME", "/root"}});
  EXPECT_EQ(c.postgres.dsn, "host=db dbname=app user=pgoutbox");
}

struct EnvErrorCase {
  std::string label;
  std::string variable;
  std::string value;
  std::string key;
  std::string says;
};

void PrintTo(const EnvErrorCase& c, std::ostream* os) { *os << c.label; }

class EnvErrors : public ::testing::TestWithParam<EnvErrorCase> {};

TEST_P(EnvErrors, NameTheVariable) {
  const auto& param = GetParam();
  const ConfigError e = error_of(kMinimal, {{param.variable, param.value}});
  EXPECT_EQ(e.where(), "environment variable " + param.variable) << e.what();
  EXPECT_EQ(e.line(), 0);
  EXPECT_EQ(e.key(), param.key) << e.what();
  EXPECT_NE(e.problem().find(param.says), std::string::npos) << e.what();
  EXPECT_TRUE(std::string(e.what()).starts_with("environment variable " + param.variable + ": ")) << e.what();
}

INSTANTIATE_TEST_SUITE_P(
    Config, EnvErrors,
    ::testing::Values(
        EnvErrorCase{"enum", "PGOUTBOX_LOG_LEVEL", "loud", "log_level",
                     "must be one of trace, debug, info, warn, error (got 'loud')"},
        EnvErrorCase{"ratio", "PGOUTBOX_LIMITS_RESUME_RATIO", "2", "limits.resume_ratio",
                     "between 0 and 1, both excluded (got 2)"},
        EnvErrorCase{"bool", "PGOUTBOX_POSTGRES_CREATE_SLOT", "sometimes", "postgres.create_slot",
                     "must be true or false"},
        EnvErrorCase{"duration", "PGOUTBOX_SHUTDOWN_TIMEOUT", "30", "shutdown_timeout", "has no unit"},
        EnvErrorCase{"null", "PGOUTBOX_POSTGRES_SLOT", "null", "postgres.slot",
                     "has no value; leave the key out to use the default (pgoutbox)"},
        EnvErrorCase{"empty_required", "PGOUTBOX_POSTGRES_DSN", "", "postgres.dsn", "needs a value"},
        EnvErrorCase{"min_above_max", "PGOUTBOX_RECONNECT_MIN", "1h", "reconnect.min",
                     "must not exceed reconnect.max (30s) (got 1h)"},
        EnvErrorCase{"table_key", "PGOUTBOX_TABLES_0_TOPIC", "a b", "tables[0].topic", "Kafka topics allow only"},
        EnvErrorCase{"table_name", "PGOUTBOX_TABLES_0_TABLE", "a.b.c", "tables[0].table", "more than two parts"},
        EnvErrorCase{"table_gap", "PGOUTBOX_TABLES_2_TABLE", "x", "tables[2]",
                     "would leave a gap: the next new table is tables[1]"},
        EnvErrorCase{"new_table_without_name", "PGOUTBOX_TABLES_1_TOPIC", "x", "tables[1].table",
                     "is required; set it in the file or in PGOUTBOX_TABLES_1_TABLE"},
        EnvErrorCase{"table_index_word", "PGOUTBOX_TABLES_FIRST_TOPIC", "x", "tables",
                     "must be named PGOUTBOX_TABLES_<index>_<KEY>"},
        EnvErrorCase{"table_index_zero_padded", "PGOUTBOX_TABLES_01_TOPIC", "x", "tables",
                     "must be named PGOUTBOX_TABLES_<index>_<KEY>"},
        EnvErrorCase{"table_unknown_key", "PGOUTBOX_TABLES_0_TOPPIC", "x", "tables[0]",
                     "names no table key; did you mean PGOUTBOX_TABLES_0_TOPIC?"},
        EnvErrorCase{"tables_whole", "PGOUTBOX_TABLES", "x", "tables", "cannot be set whole"},
        EnvErrorCase{"properties_whole", "PGOUTBOX_KAFKA_PROPERTIES", "x", "kafka.properties", "cannot be set whole"},
        EnvErrorCase{"property_empty_name", "PGOUTBOX_KAFKA_PROPERTY_", "x", "kafka.properties",
                     "is not a property name"},
        EnvErrorCase{"property_bad_name", "PGOUTBOX_KAFKA_PROPERTY_LINGER-MS", "5", "kafka.properties",
                     "is not a property name"},
        EnvErrorCase{"property_empty_value", "PGOUTBOX_KAFKA_PROPERTY_LINGER_MS", "", "kafka.properties.linger.ms",
                     "is empty"},
        EnvErrorCase{"property_acks", "PGOUTBOX_KAFKA_PROPERTY_ACKS", "0", "kafka.properties.acks", "must stay all"},
        EnvErrorCase{"typo", "PGOUTBOX_POSTGRES_SLTO", "x", "",
                     "unknown configuration variable; did you mean PGOUTBOX_POSTGRES_SLOT?"},
        EnvErrorCase{"typo_squashed", "PGOUTBOX_LIMITS_MAXINFLIGHTBYTES", "1", "",
                     "did you mean PGOUTBOX_LIMITS_MAX_IN_FLIGHT_BYTES?"},
        EnvErrorCase{"typo_family_properties", "PGOUTBOX_KAFKA_PROPERTIES_LINGER_MS", "5", "",
                     "did you mean PGOUTBOX_KAFKA_PROPERTY_LINGER_MS?"},
        EnvErrorCase{"typo_family_tables", "PGOUTBOX_TABLE_0_TOPIC", "x", "", "did you mean PGOUTBOX_TABLES_0_TOPIC?"},
        EnvErrorCase{"password_empty", "PGOUTBOX_POSTGRES_PASSWORD", "", "postgres.password", "is empty"}),
    [](const auto& test_case) { return test_case.param.label; });

TEST(ConfigEnv, FromProcessReadsTheRealEnvironment) {
  const Environment env = Environment::from_process();
  for (const char* name : {"PATH", "HOME"}) {
    const char* value = std::getenv(name);
    EXPECT_EQ(env.get(name), value != nullptr ? std::optional<std::string>(value) : std::nullopt) << name;
  }
  EXPECT_EQ(env.get("PGOUTBOX_SURELY_NOT_SET_0b1c"), std::nullopt);
}

}  // namespace
}  // namespace pgoutbox::config
