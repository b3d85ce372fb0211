// pgoutbox publishing to a Kafka that admits only clients bearing a JWT from an identity provider
// (SASL/OAUTHBEARER with sasl.oauthbearer.method=oidc). The test serves the provider on loopback
// (identity_provider.h): a token endpoint answering librdkafka's client-credentials grant with
// RS256-signed JWTs, and the JWKS with their key. The broker (Kafka 4.4; 4.1 and 3.9 for the
// version matrix) validates each token with its own OAuthBearerValidatorCallbackHandler against
// that JWKS, the expected audience and issuer, and authorises the token's subject through ACLs,
// so a delivered row proves that the principal was pgoutbox's client id. An expired token and a
// refused client (401 from the token endpoint) are each named with their fix in `run`'s log and
// in `check`, and the client secret is never printed by `run`, `check` or `validate`.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <random>
#include <sstream>

#include "../app/operator_fixture.h"
#include "eventually.h"
#include "identity_provider.h"
#include "kafka_client.h"
#include "pgoutbox_process.h"
#include "secured_run.h"
#include "services.h"
#include "test_ca.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

// 32 random letters, so that a grep for it in the output means it was printed.
std::string random_secret() {
  std::random_device rd;
  std::string out;
  for (int i = 0; i < 32; ++i) out.push_back(static_cast<char>('a' + rd() % 26));
  return out;
}

constexpr const char* kClientId = "pgoutbox-oidc";
constexpr const char* kScope = "kafka.produce";

// The provider, then the broker that trusts it: a SASL_SSL listener offering only OAUTHBEARER,
// validated by Kafka's own handler, and the standard authorizer letting the token's subject
// (the client id) write the oidc_ topics.
struct OidcKafka {
  std::string client_secret = random_secret();
  IdentityProvider provider{kClientId, client_secret, "https://idp.pgoutbox.test", "pgoutbox-kafka"};
  ScratchDir certs{"kafka-oidc", std::nullopt};
  TestCa ca{certs.path(), "ca"};
  std::string keystore = ca.pem_keystore(ca.issue("broker", "localhost", "DNS:localhost,IP:127.0.0.1"), "broker");
  std::string libs;
  std::string more_properties;  // more server.properties lines
  KafkaBroker broker{options()};

  KafkaBroker::Options options() const {
    const std::string listener = "listener.name.sasl_ssl.oauthbearer.";
    return {.listeners = {"SASL_SSL"},
            .properties =
                "ssl.keystore.type=PEM\n"
                "ssl.keystore.location=" +
                keystore +
                "\n"
                "listener.name.sasl_ssl.sasl.enabled.mechanisms=OAUTHBEARER\n" +
                listener +
                "sasl.jaas.config="
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;\n" +
                listener +
                "sasl.server.callback.handler.class="
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler\n"
                "sasl.oauthbearer.jwks.endpoint.url=" +
                provider.jwks_url() +
                "\n"
                "sasl.oauthbearer.expected.audience=" +
                provider.audience() +
                "\n"
                "sasl.oauthbearer.expected.issuer=" +
                provider.issuer() +
                "\n"
                "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
                // The harness (PLAINTEXT) and the controller are ANONYMOUS: the super user.
                "super.users=User:ANONYMOUS\n"
                "allow.everyone.if.no.acl.found=false\n" +
                more_properties,
            .libs = libs,
            // Kafka 4.4 fetches no OAuth URL that this JVM allow-list does not name, so that a
            // configuration cannot make the broker reach arbitrary hosts (3.9.1 and 4.1 read it too).
            .system_properties = {"org.apache.kafka.sasl.oauthbearer.allowed.urls=" + provider.jwks_url()}};
  }

  OidcKafka(std::string broker_libs, std::string properties)
      : libs(std::move(broker_libs)), more_properties(std::move(properties)) {
    allow_acls(broker.bootstrap(), std::string("User:") + kClientId,
               {{RD_KAFKA_RESOURCE_TOPIC, "oidc_", RD_KAFKA_RESOURCE_PATTERN_PREFIXED, RD_KAFKA_ACL_OPERATION_WRITE},
                {RD_KAFKA_RESOURCE_TOPIC, "oidc_", RD_KAFKA_RESOURCE_PATTERN_PREFIXED, RD_KAFKA_ACL_OPERATION_DESCRIBE},
                {RD_KAFKA_RESOURCE_BROKER, "kafka-cluster", RD_KAFKA_RESOURCE_PATTERN_LITERAL,
                 RD_KAFKA_ACL_OPERATION_IDEMPOTENT_WRITE}});
    for (const char* topic : {"oidc_ok", "oidc_expired", "oidc_refused", "oidc_audience"})
      create_topic(broker.bootstrap(), topic, 1);
  }
};

class KafkaOidcTest : public ::testing::Test {
 protected:
  // The broker's jars: empty for the default Kafka (4.4); the version matrix's older ones below.
  virtual std::string broker_libs() const { return ""; }
  virtual std::string broker_properties() const { return ""; }

  // One provider and broker for the suite (a start takes seconds), stopped when it ends.
  OidcKafka& kafka() {
    if (!suite_kafka_) suite_kafka_ = std::make_unique<OidcKafka>(broker_libs(), broker_properties());
    return *suite_kafka_;
  }
  static void TearDownTestSuite() { suite_kafka_.reset(); }
  static inline std::unique_ptr<OidcKafka> suite_kafka_;

  void SetUp() override { kafka().provider.set_mode(IdentityProvider::Mode::valid); }

  PgCluster& pg = shared_postgres();
  ScratchDir dir{"kafka-oidc", std::nullopt};

  // The client secret is never in the file itself: the loader refuses that. `secret_file`
  // names a file holding it; without one it comes from the environment.
  std::string config(const std::string& name, const std::string& topic, const std::string& secret_file = "") {
    pg.exec("CREATE TABLE IF NOT EXISTS " + name +
            " (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), "
            "aggregatetype text NOT NULL, aggregateid text, type text, payload jsonb)");
    PgoutboxConfig c;
    c.dsn = pg.dsn();
    c.slot = name + "_slot";
    c.publication = name + "_pub";
    c.brokers = kafka().broker.bootstrap("SASL_SSL");
    c.tables.push_back({.table = "public." + name, .topic = topic});
    c.kafka_properties = {{"security.protocol", "SASL_SSL"},
                          {"ssl.ca.location", kafka().ca.cert()},
                          {"sasl.mechanisms", "OAUTHBEARER"},
                          {"sasl.oauthbearer.method", "oidc"},
                          {"sasl.oauthbearer.client.id", kClientId},
                          {"sasl.oauthbearer.token.endpoint.url", kafka().provider.token_url()},
                          {"sasl.oauthbearer.scope", kScope}};
    if (!secret_file.empty()) c.kafka_properties["sasl.oauthbearer.client.secret_file"] = secret_file;
    c.extra_yaml = "shutdown_timeout: 2s\n";
    return write_pgoutbox_config(dir.path() + "/" + name + ".yaml", c);
  }

  static std::vector<std::string> secret_env(const std::string& secret) {
    return {"PGOUTBOX_KAFKA_PROPERTY_SASL_OAUTHBEARER_CLIENT_SECRET=" + secret};
  }

  // Runs pgoutbox, inserts `rows` rows and returns the log once `done` holds (or 90 s passed).
  std::string run_until(const std::string& name, const std::string& cfg, std::vector<std::string> env,
                        const std::function<bool(const std::string&)>& done, int rows = 1) {
    return test::run_until({pg, dir.path(), "O", 90s}, name, cfg, std::move(env), done, rows);
  }

  // A refused login: `run` logs the reason (librdkafka's, or the broker's) and the OIDC fix, no row reaches `topic`,
  // `check` blocks with both, and neither prints a secret.
  void expect_named_with_fix(const std::string& name, const std::string& topic, const std::vector<std::string>& env,
                             const std::string& reason, const std::string& fix, const std::string& secret) {
    const auto cfg = config(name, topic);
    const auto log = run_until(name, cfg, env, [&](const std::string& text) {
      return text.find(reason) != std::string::npos && text.find(fix) != std::string::npos;
    });
    EXPECT_EQ(topic_record_count(kafka().broker.bootstrap(), topic), 0);
    EXPECT_NE(log.find(test::kCheckpointLoginRefused), std::string::npos) << log;
    const auto check = run_pgoutbox(dir.path(), {"check", "-c", cfg, "--kafka-timeout", "5"}, env);
    EXPECT_EQ(check.exit_code, 1) << check.output;
    const auto fail = line_starting(check.output, "FAIL  kafka");
    EXPECT_NE(fail.find(reason), std::string::npos) << check.output;
    EXPECT_NE(fail.find(fix), std::string::npos) << check.output;
    for (const auto& s : {secret, kafka().client_secret}) {
      EXPECT_EQ(log.find(s), std::string::npos) << "a client secret was logged";
      EXPECT_EQ(check.output.find(s), std::string::npos) << "check printed a client secret";
    }
  }

  // librdkafka takes any unexpired token; the broker checks its audience against
  // sasl.oauthbearer.expected.audience and refuses one issued for another.
  void expect_foreign_audience_refused(const std::string& name) {
    kafka().provider.set_mode(IdentityProvider::Mode::foreign_audience);
    expect_named_with_fix(name, "oidc_audience", secret_env(kafka().client_secret), "SASL authentication error",
                          "the audience and issuer the listener expects", kafka().client_secret);
  }

  // Every row reaches the topic with a token from the provider read through a secret file; `check`
  // and `validate` pass; none of them prints the client secret.
  void expect_every_row_published(const std::string& name, const std::string& topic) {
    const std::string secret_file = dir.path() + "/" + name + ".secret";
    {
      std::ofstream out(secret_file);
      out << kafka().client_secret << "\n";
    }
    ::chmod(secret_file.c_str(), 0600);
    const auto cfg = config(name, topic, secret_file);
    constexpr int kRows = 50;
    const auto log = run_until(
        name, cfg, {},
        [&](const std::string&) { return topic_record_count(kafka().broker.bootstrap(), topic) >= kRows; }, kRows);
    EXPECT_EQ(topic_record_count(kafka().broker.bootstrap(), topic), kRows) << log;
    EXPECT_GE(kafka().provider.tokens_issued(), 1);
    EXPECT_EQ(kafka().provider.last_token_request(), std::string("grant_type=client_credentials&scope=") + kScope);

    const auto check = run_pgoutbox(dir.path(), {"check", "-c", cfg, "--kafka-timeout", "10"});
    EXPECT_EQ(check.exit_code, 0) << check.output;
    const auto validate = run_pgoutbox(dir.path(), {"config", "validate", cfg});
    EXPECT_EQ(validate.exit_code, 0) << validate.output;
    for (const auto& [what, text] :
         {std::pair{"run's log", log}, {"check", check.output}, {"validate", validate.output}}) {
      EXPECT_EQ(text.find(kafka().client_secret), std::string::npos) << what << " printed the client secret";
    }
  }
};

TEST_F(KafkaOidcTest, PublishesEveryRowWithATokenFromTheIdentityProvider) {
  expect_every_row_published("ko_ok", "oidc_ok");
}

TEST_F(KafkaOidcTest, AnExpiredTokenIsNamedWithItsFixInRunAndBlocksCheck) {
  kafka().provider.set_mode(IdentityProvider::Mode::expired);
  expect_named_with_fix("ko_expired", "oidc_expired", secret_env(kafka().client_secret),
                        "Must supply an unexpired token", "synchronise both with NTP", kafka().client_secret);
}

TEST_F(KafkaOidcTest, ARefusedClientIsNamedWithItsFixInRunAndBlocksCheck) {
  const std::string wrong = random_secret();
  expect_named_with_fix("ko_refused", "oidc_refused", secret_env(wrong), "invalid_client",
                        "the identity provider does not know kafka.properties.sasl.oauthbearer.client.id", wrong);
}

TEST_F(KafkaOidcTest, ATokenForAnotherAudienceIsRefusedByTheBrokerAndNamedWithItsFix) {
  expect_foreign_audience_refused("ko_audience");
}

// The older brokers of the version matrix: their own validator of the same tokens, and the
// broker-side refusal of a foreign audience.
class KafkaOidc39Test : public KafkaOidcTest {
 protected:
  std::string broker_libs() const override { return kafka_3_9_libs(); }
};

TEST_F(KafkaOidc39Test, PublishesEveryRowWithATokenFromTheIdentityProvider) {
  expect_every_row_published("ko39_ok", "oidc_ok");
}

TEST_F(KafkaOidc39Test, ATokenForAnotherAudienceIsRefusedByTheBrokerAndNamedWithItsFix) {
  expect_foreign_audience_refused("ko39_audience");
}

// Kafka 4.1's OAuthBearerValidatorCallbackHandler makes its default DefaultJwtValidator without a
// key resolver, so it falls back to ClientJwtValidator, which checks neither the signature nor
// the audience nor the issuer: with the configuration above, 4.1.1 let a token for another
// audience write. Naming BrokerJwtValidator restores the checks (docs/security.md).
class KafkaOidc41Test : public KafkaOidcTest {
 protected:
  std::string broker_libs() const override { return kafka_4_1_libs(); }
  std::string broker_properties() const override {
    return "sasl.oauthbearer.jwt.validator.class="
           "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator\n";
  }
};

TEST_F(KafkaOidc41Test, PublishesEveryRowWithATokenFromTheIdentityProvider) {
  expect_every_row_published("ko41_ok", "oidc_ok");
}

TEST_F(KafkaOidc41Test, ATokenForAnotherAudienceIsRefusedByTheBrokerAndNamedWithItsFix) {
  expect_foreign_audience_refused("ko41_audience");
}

}  // namespace
}  // namespace pgoutbox::test
