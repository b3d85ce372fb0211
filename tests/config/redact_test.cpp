// Secrets never show: not in redacted DSNs and properties, not in describe(), not in any error.

#include <gtest/gtest.h>

#include <algorithm>

#include "config_test_util.h"
#include "pgoutbox/config/redact.h"
#include "pgoutbox/secrets.h"

namespace pgoutbox::config {
namespace {

using test::error_of;
using test::kMinimal;
using test::load_yaml;
using test::ScratchDir;

struct DsnCase {
  std::string label;
  std::string dsn;
  std::string redacted;
};

void PrintTo(const DsnCase& c, std::ostream* os) { *os << c.label; }

class RedactDsn : public ::testing::TestWithParam<DsnCase> {};

TEST_P(RedactDsn, HidesPasswordsAndKeepsTheRest) { EXPECT_EQ(redact_dsn(GetParam().dsn), GetParam().redacted); }

INSTANTIATE_TEST_SUITE_P(
    Config, RedactDsn,
    ::testing::Values(
        DsnCase{"keyword", "host=db password=hunter2 user=relay", "host=db password=******** user=relay"},
        DsnCase{"keyword_last", "host=db password=hunter2", "host=db password=********"},
        DsnCase{"keyword_spaced", "host=db password = hunter2  user=relay", "host=db password = ********  user=relay"},
        DsnCase{"keyword_quoted", R"(password='hunter 2\'s' dbname='my db')", "password=******** dbname='my db'"},
        DsnCase{"keyword_escaped", R"(password=hun\ ter2 port=5432)", "password=******** port=5432"},
        DsnCase{"sslpassword", "sslkey=/k sslpassword=hunter2 sslmode=verify-full",
                "sslkey=/k sslpassword=******** sslmode=verify-full"},
        DsnCase{"keyword_none", "host=db dbname=app", "host=db dbname=app"},
        DsnCase{"keyword_empty_password", "password='' host=db", "password=******** host=db"},
        DsnCase{"nested_dbname", "dbname='host=x password=hunter2' port=1", "dbname=******** port=1"},
        DsnCase{"uri_userinfo", "postgresql://relay:hunter2@db:5432/app?sslmode=require",
                "postgresql://relay:********@db:5432/app?sslmode=require"},
        DsnCase{"uri_short_prefix", "postgres://relay:hunter2@db/app", "postgres://relay:********@db/app"},
        DsnCase{"uri_multi_host", "postgresql://relay:hunter2@db1:5432,db2:5432/app",
                "postgresql://relay:********@db1:5432,db2:5432/app"},
        DsnCase{"uri_query", "postgresql://db/app?user=relay&password=hunter2&sslmode=require",
                "postgresql://db/app?user=relay&password=********&sslmode=require"},
        DsnCase{"uri_query_encoded_name", "postgresql://db/app?pass%77ord=hunter2",
                "postgresql://db/app?pass%77ord=********"},
        DsnCase{"uri_user_only", "postgresql://relay@db/app", "postgresql://relay@db/app"},
        DsnCase{"uri_no_userinfo", "postgresql://db:5432/app", "postgresql://db:5432/app"},
        DsnCase{"malformed_missing_equals", "host=db hunter2 password=x", "host=db ********"},
        DsnCase{"malformed_unterminated", "host=db password='hunter2", "host=db password=********"},
        DsnCase{"malformed_uri_query", "postgresql://u:hunter2@db/app?hunter3",
                "postgresql://u:********@db/app?********"}),
    [](const auto& test_case) { return test_case.param.label; });

TEST(ConfigRedact, Properties) {
  const std::map<std::string, std::string> properties{
      {"linger.ms", "5"},         {"sasl.username", "relay"},       {"sasl.password", "p1"},
      {"ssl.key.password", "p2"}, {"ssl.keystore.password", "p3"},  {"sasl.oauthbearer.client.secret", "p4"},
      {"ssl.key.pem", "p5"},      {"sasl.oauthbearer.config", "p6"}};
  EXPECT_EQ(redact_properties(properties),
            (std::map<std::string, std::string>{{"linger.ms", "5"},
                                                {"sasl.username", "relay"},
                                                {"sasl.password", "********"},
                                                {"ssl.key.password", "********"},
                                                {"ssl.keystore.password", "********"},
                                                {"sasl.oauthbearer.client.secret", "********"},
                                                {"ssl.key.pem", "********"},
                                                {"sasl.oauthbearer.config", "********"}}));
}

// Issue 25 item 6: libpq and librdkafka quote their input in forms no key=value pattern
// foresees (`invalid percent-encoded token: "ab%zz"`): every secret of the configuration, as
// written and as read, is removed wherever it appears in a message.
TEST(ConfigRedact, EverySecretOfTheConfigurationIsRemovedWhereverItAppears) {
  Config config;
  config.postgres.dsn = "postgresql://relay:ab%zz@db/app?sslpassword=k%41ey-1&sslmode=require";
  config.postgres.password = "from-the-env";
  config.checkpoint.signing_key = "checkpoint-signing-key-0123456789abcdef";
  config.kafka.properties = {{"sasl.username", "relay"}, {"sasl.password", "kafka-pw"}, {"ssl.key.password", "kp"}};
  const auto secrets = secrets_of(config);
  for (const std::string expected :
       {"ab%zz", "k%41ey-1", "kAey-1", "from-the-env", "kafka-pw", "kp", "checkpoint-signing-key-0123456789abcdef"}) {
    EXPECT_NE(std::find(secrets.begin(), secrets.end(), expected), secrets.end()) << expected;
  }
  EXPECT_EQ(std::find(secrets.begin(), secrets.end(), "relay"), secrets.end());

  Config keyword;
  keyword.postgres.dsn = R"(host=db password='hunter 2\'s' dbname='host=x password=nested-pw')";
  const auto keyword_secrets = secrets_of(keyword);
  for (const std::string expected : {"hunter 2's", "nested-pw"}) {
    EXPECT_NE(std::find(keyword_secrets.begin(), keyword_secrets.end(), expected), keyword_secrets.end()) << expected;
  }

  remember_secrets(secrets);
  remember_secrets(keyword_secrets);
  EXPECT_EQ(redact_secrets(R"(invalid percent-encoded token: "ab%zz")"),
            R"(invalid percent-encoded token: "********")");
  EXPECT_EQ(redact_secrets("user relay, kafka-pw and kafka-pw, kAey-1, hunter 2's"),
            "user relay, ******** and ********, ********, ********");
  EXPECT_EQ(redact_secrets("kp is too short to hide"), "kp is too short to hide")
      << "a secret of fewer than 4 bytes would garble every message";
  forget_secrets();
  EXPECT_EQ(redact_secrets("ab%zz"), "ab%zz");
}

TEST(ConfigRedact, DescribeShowsTheEffectiveConfigWithoutSecrets) {
  ScratchDir dir;
  const Config c = load_yaml(
      "postgres:\n  dsn: host=other\nkafka:\n  brokers: k:9092\n  properties:\n    linger.ms: 7\n"
      "    ssl.key.password_file: " +
          dir.write("key", "secret-2\n") + "\ntables:\n  - table: '\"Sales\".\"Order Events\"'\n    topic: t\n",
      {{"PGOUTBOX_POSTGRES_DSN", "host=db sslpassword=secret-1 user=relay"},
       {"PGOUTBOX_POSTGRES_PASSWORD", "secret-3"},
       {"PGOUTBOX_KAFKA_PROPERTY_SASL_PASSWORD", "secret-4"}});
  const std::string text = describe(c);
  for (const std::string secret : {"secret-1", "secret-2", "secret-3", "secret-4"}) {
    EXPECT_EQ(text.find(secret), std::string::npos) << secret << " in:\n" << text;
  }
  for (const std::string line :
       {"configuration from config.yaml\n", "  postgres.dsn: host=db sslpassword=******** user=relay\n",
        "  postgres.password: ********\n", "  kafka.properties.linger.ms: 7\n",
        "  kafka.properties.sasl.password: ********\n", "  kafka.properties.ssl.key.password: ********\n",
        "  tables[0].table: \"Sales\".\"Order Events\"\n", "  tables[0].topic: t\n", "  metrics_address: \"\"\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << " not in:\n" << text;
  }
}

TEST(ConfigRedact, DescribeSaysWhenThereIsNoPassword) {
  EXPECT_NE(describe(load_yaml(kMinimal)).find("  postgres.password: (not set)\n"), std::string::npos);
}

struct LeakCase {
  std::string label;
  std::string yaml;
  test::Vars env;
};

void PrintTo(const LeakCase& c, std::ostream* os) { *os << c.label; }

class NoSecretInErrors : public ::testing::TestWithParam<LeakCase> {};

TEST_P(NoSecretInErrors, EvenWhenTheSecretIsWhatIsWrong) {
  const ConfigError e = error_of(GetParam().yaml, GetParam().env);
  EXPECT_EQ(std::string(e.what()).find("hunter"), std::string::npos) << e.what();
}

const std::string kRest = "kafka: {brokers: k}\ntables: [{table: t}]\n";

INSTANTIATE_TEST_SUITE_P(
    Config, NoSecretInErrors,
    ::testing::Values(
        LeakCase{"dsn_word_without_keyword", "postgres:\n  dsn: host=db hunter2 password\n" + kRest, {}},
        LeakCase{"dsn_unterminated_quote", "postgres:\n  dsn: host=db password='hunter2\n" + kRest, {}},
        LeakCase{"dsn_uri_bad_query", "postgres:\n  dsn: postgresql://u:hunter2@db/app?hunter3\n" + kRest, {}},
        LeakCase{"dsn_from_env", kRest, {{"PGOUTBOX_POSTGRES_DSN", "password='hunter2"}}},
        LeakCase{"dsn_and_env_password",
                 "postgres:\n  dsn: host=db password=hunter2\n" + kRest,
                 {{"PGOUTBOX_POSTGRES_PASSWORD", "hunter3"}}},
        LeakCase{"password_in_file", "postgres:\n  dsn: host=db\n  password: hunter2\n" + kRest, {}},
        LeakCase{"env_password_and_other_error",
                 "postgres:\n  dsn: host=db\nlog_level: loud\n" + kRest,
                 {{"PGOUTBOX_POSTGRES_PASSWORD", "hunter2"}}},
        LeakCase{"misspelt_password_variable",
                 "postgres:\n  dsn: host=db\n" + kRest,
                 {{"PGOUTBOX_POSTGRES_PASSWROD", "hunter2"}}},
        LeakCase{"secret_property_as_list",
                 "postgres: {dsn: host=db}\nkafka:\n  brokers: k\n  properties:\n    sasl.password: [hunter2]\ntables: "
                 "[{table: t}]\n",
                 {}},
        LeakCase{"secret_property_and_file",
                 "postgres: {dsn: host=db}\nkafka:\n  brokers: k\n  properties:\n    sasl.password: hunter2\n"
                 "    sasl.password_file: /x\ntables: [{table: t}]\n",
                 {}},
        LeakCase{"env_secret_property_and_other_error",
                 "postgres: {dsn: host=db}\n" + kRest,
                 {{"PGOUTBOX_KAFKA_PROPERTY_SASL_PASSWORD", "hunter2"}, {"PGOUTBOX_TABLES_0_TOPIC", "a b"}}},
        LeakCase{"yaml_syntax_error_in_secret_line", "postgres:\n  dsn: \"host=db password=hunter2\n" + kRest, {}}),
    [](const auto& test_case) { return test_case.param.label; });

}  // namespace
}  // namespace pgoutbox::config
