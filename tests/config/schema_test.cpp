// The schema documents every key, its environment variable follows the one naming rule and
// really works, and the generated reference mentions them all.

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "config_test_util.h"
#include "pgoutbox/config/redact.h"
#include "pgoutbox/config/schema.h"
#include "pgoutbox/config/topic_template.h"

namespace pgoutbox::config {
namespace {

using test::kMinimal;
using test::load_yaml;
using test::ScratchDir;

std::string rule(std::string path) {
  std::string out = "PGOUTBOX_";
  if (path.starts_with("tables[].")) {
    out += "TABLES_<i>_";
    path = path.substr(9);
  }
  if (path.starts_with("messages[].")) {
    out += "MESSAGES_<i>_";
    path = path.substr(11);
  }
  for (char c : path) out += c == '.' ? '_' : char(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

TEST(ConfigSchema, EveryKeyIsDocumented) {
  const auto keys = schema();
  ASSERT_GE(keys.size(), 30U);
  std::set<std::string> paths;
  std::set<std::string> envs;
  for (const auto& key : keys) {
    EXPECT_TRUE(paths.insert(key.path).second) << "duplicate path " << key.path;
    EXPECT_TRUE(envs.insert(key.env).second) << "duplicate variable " << key.env;
    EXPECT_GE(key.description.size(), 20U) << key.path;
    EXPECT_FALSE(key.type.empty()) << key.path;
    EXPECT_TRUE(key.env.starts_with("PGOUTBOX_")) << key.path;
    if (key.required) {
      EXPECT_TRUE(key.default_value.empty()) << key.path;
    }
    if (key.path != "kafka.properties" && key.path != "tables" && key.path != "messages") {
      EXPECT_EQ(key.env, rule(key.path)) << key.path;
    }
  }
  for (const std::string path : {"postgres.dsn", "kafka.brokers", "tables", "tables[].table"}) {
    const auto it = std::find_if(keys.begin(), keys.end(), [&](const KeyInfo& k) { return k.path == path; });
    ASSERT_NE(it, keys.end()) << path;
    EXPECT_TRUE(it->required) << path;
  }
}

TEST(ConfigSchema, DefaultsAreTheStructsDefaults) {
  const auto keys = schema();
  const auto default_of = [&](const std::string& path) {
    for (const auto& key : keys) {
      if (key.path == path) return key.default_value;
    }
    return std::string("(no such key)");
  };
  EXPECT_EQ(default_of("postgres.slot"), "pgoutbox");
  EXPECT_EQ(default_of("postgres.status_interval"), "10s");
  EXPECT_EQ(default_of("limits.max_in_flight_bytes"), "16MiB");
  EXPECT_EQ(default_of("limits.resume_ratio"), "0.5");
  EXPECT_EQ(default_of("reconnect.min"), "500ms");
  EXPECT_EQ(default_of("reconnect.factor"), "2.0");
  EXPECT_EQ(default_of("tables[].topic"), "outbox.event.${aggregatetype}");
  EXPECT_EQ(default_of("tables[].columns.type"), "type");
  EXPECT_EQ(default_of("tables[].columns.headers"), "null");
  EXPECT_EQ(default_of("log_level"), "info");
  EXPECT_EQ(default_of("metrics_address"), "");
  EXPECT_EQ(default_of("kafka.properties"), "{}");
}

// A valid value, different from the default, for each key's type; written so describe() prints
// it back unchanged.
std::optional<std::string> sample(const KeyInfo& key) {
  if (key.path == "postgres.dsn" || key.path == "postgres.primary_dsn") return "host=elsewhere";
  if (key.path == "limits.resume_ratio") return "0.75";
  if (key.path == "reconnect.factor") return "1.5";
  if (key.type == "bool") return key.default_value == "true" ? "false" : "true";
  if (key.type == "duration") return "7s";
  if (key.type == "size") return "3MiB";
  if (key.type == "integer") return "7";
  if (key.type.starts_with("one of ")) {
    const std::string list = key.type.substr(7);
    const std::string first = list.substr(0, list.find(','));
    const std::string second = list.substr(list.find(", ") + 2);
    return first != key.default_value ? first : second.substr(0, second.find(','));
  }
  if (key.type == "string (secret)") return "sample-secret";
  if (key.type == "string" || key.type == "name" || key.type == "slot name" || key.type == "column" ||
      key.type == "column or null" || key.type == "field" || key.type == "field or null")
    return "sample_7";
  if (key.type == "host:port") return "127.0.0.1:7";
  if (key.type == "host names") return "sample-7.example";
  if (key.type == "table name") return "app.sample_7";
  if (key.type == "topic template" || key.type == "type template") return "sample.${sample_7}";
  if (key.type == "URI reference") return "/sample/7";
  if (key.type == "topic") return "sample.dlq_7";
  if (key.type == "regular expression") return "sample\\.[a-z]+_7";
  if (key.type == "SQL predicate") return "sample_7 > 7";
  return std::nullopt;
}

TEST(ConfigSchema, EveryEnvironmentVariableOverridesItsKey) {
  for (const auto& key : schema()) {
    // Families, tested in env_test.cpp and loader_test.cpp.
    if (key.path == "kafka.properties" || key.path == "tables" || key.path == "messages") continue;
    std::string variable = key.env;
    std::string path = key.path;
    std::map<std::string, std::string> others;
    if (path.starts_with("tables[].")) {
      variable.replace(variable.find("<i>"), 3, "0");
      path = "tables[0]." + path.substr(9);
    }
    if (path.starts_with("messages[].")) {
      variable.replace(variable.find("<i>"), 3, "0");
      path = "messages[0]." + path.substr(11);
      // A new message outbox needs its prefix.
      if (path != "messages[0].prefix") others["PGOUTBOX_MESSAGES_0_PREFIX"] = "p";
    }
    if (key.path == "postgres.password_file") {
      ScratchDir dir;
      EXPECT_EQ(load_yaml(kMinimal, {{variable, dir.write("pg", "s\n")}}).postgres.password, "s");
      continue;
    }
    if (key.path == "checkpoint.signing_key_file") {
      ScratchDir dir;
      const std::string secret(40, 'k');
      EXPECT_EQ(load_yaml(kMinimal, {{variable, dir.write("key", secret + "\n")}}).checkpoint.signing_key, secret);
      continue;
    }
    // A signing key is at least 32 bytes, and exactly-once needs one.
    if (key.path == "delivery") others["PGOUTBOX_CHECKPOINT_SIGNING_KEY"] = std::string(40, 'k');
    // Expanding the payload and the format's own null belong to format debezium-json.
    const std::string family = path.starts_with("messages[") ? "PGOUTBOX_MESSAGES_0_" : "PGOUTBOX_TABLES_0_";
    const auto member_at = path.find("].");
    const std::string member = member_at == std::string::npos ? path : path.substr(member_at + 2);
    if (member == "format.expand_json_payload" || key.path == "tables[].null_payload") {
      others[family + "FORMAT_TYPE"] = "debezium-json";
    }
    // The CloudEvents attributes are read with a CloudEvents format.
    if (member == "format.source" || member == "format.event_type" || member == "format.subject_from_key") {
      others[family + "FORMAT_TYPE"] = "cloudevents-binary";
    }
    auto value = sample(key);
    ASSERT_TRUE(value) << key.path << " has type " << key.type << ", which this test has no sample for";
    if (key.path == "checkpoint.signing_key") value = std::string(40, 's');
    others[variable] = *value;
    const std::string text = describe(load_yaml(kMinimal, others));
    const std::string shown = key.secret ? "********" : *value;
    EXPECT_NE(text.find("  " + path + ": " + shown + "\n"), std::string::npos)
        << variable << "=" << *value << " did not set " << path << ":\n"
        << text;
  }
}

TEST(ConfigSchema, ReferenceMentionsEveryKeyAndVariable) {
  const std::string reference = reference_markdown();
  EXPECT_NE(reference.find("| Key | Type | Default | Required | Environment variable | Description |"),
            std::string::npos);
  for (const auto& key : schema()) {
    EXPECT_NE(reference.find("| `" + key.path + "` |"), std::string::npos) << key.path;
    EXPECT_NE(reference.find("`" + key.env + "`"), std::string::npos) << key.env;
  }
  EXPECT_NE(reference.find("| `postgres.dsn` | string | — | yes | `PGOUTBOX_POSTGRES_DSN` |"), std::string::npos);
  EXPECT_NE(
      reference.find("| `limits.max_in_flight_bytes` | size | `16MiB` | no | `PGOUTBOX_LIMITS_MAX_IN_FLIGHT_BYTES` |"),
      std::string::npos);
  EXPECT_NE(reference.find("(environment only)"), std::string::npos);
}

TEST(ConfigTopicTemplate, SplitsLiteralsAndColumns) {
  EXPECT_EQ(parse_topic_template("outbox.event.${aggregatetype}"),
            (std::vector<TopicPart>{{false, "outbox.event."}, {true, "aggregatetype"}}));
  EXPECT_EQ(parse_topic_template("${a}${b}-x"), (std::vector<TopicPart>{{true, "a"}, {true, "b"}, {false, "-x"}}));
  EXPECT_EQ(parse_topic_template("fixed_topic"), (std::vector<TopicPart>{{false, "fixed_topic"}}));
  EXPECT_EQ(parse_topic_template("t.${Order Type}"), (std::vector<TopicPart>{{false, "t."}, {true, "Order Type"}}));
  EXPECT_THROW(parse_topic_template(""), std::invalid_argument);
  EXPECT_THROW(parse_topic_template(std::string(250, 'a')), std::invalid_argument);
  EXPECT_NO_THROW(parse_topic_template(std::string(249, 'a')));
  EXPECT_THROW(parse_topic_template("a}"), std::invalid_argument);
}

}  // namespace
}  // namespace pgoutbox::config
