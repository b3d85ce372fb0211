// pgoutbox publishing to a Kafka that only admits authenticated clients, as managed Kafka does:
// an SSL listener that requires client certificates and a SASL_SSL listener with SCRAM-SHA-512,
// SCRAM-SHA-256 (its user made by Kafka's own `kafka-storage format --add-scram` before the
// broker serves) and PLAIN, the standard authorizer on, and ACLs that let pgoutbox's users write
// only their own topics. An untrusted broker certificate, a wrong SASL password and a topic
// without an ACL each say so in `run`, and `check` blocks on them (naming the fix); no password
// is ever printed.
//
// SCRAM: before 2.6.1 librdkafka appended its nonce twice to the SCRAM client-final-message,
// which Kafka 4.0 and later refuse as "invalid credentials" whatever the password
// (confluentinc/librdkafka#4895). pgoutbox links the librdkafka scripts/setup.sh builds (2.8.0),
// so SCRAM-SHA-512 and SCRAM-SHA-256 must publish every row against the default broker (Kafka
// 4.4) and against the older brokers of the version matrix (KafkaSecured41Test, KafkaSecured39Test:
// a second broker with the same configuration); mutual TLS and PLAIN must with any Kafka.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>

#include "../app/operator_fixture.h"
#include "eventually.h"
#include "kafka_client.h"
#include "pgoutbox_process.h"
#include "secured_run.h"
#include "services.h"
#include "test_ca.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

// A password of 24 random letters, so that a grep for it in the output means it was printed.
std::string random_password() {
  std::random_device rd;
  std::string out;
  for (int i = 0; i < 24; ++i) out.push_back(static_cast<char>('a' + rd() % 26));
  return out;
}

// The SASL_SSL listener offers SCRAM-SHA-512, SCRAM-SHA-256 (one user for both) and PLAIN (its
// user in the listener's JAAS line); `libs` picks the broker's version, all else is the same.
struct SecuredKafka {
  std::string scram_password = random_password();
  std::string plain_password = random_password();
  ScratchDir certs{"kafka-tls", std::nullopt};
  TestCa ca{certs.path(), "ca"};
  TestCa other_ca{certs.path(), "other-ca"};
  TestCa::Issued broker_cert = ca.issue("broker", "localhost", "DNS:localhost,IP:127.0.0.1");
  TestCa::Issued client = ca.issue("client", "pgoutbox-mtls");
  std::string keystore = ca.pem_keystore(broker_cert, "broker");
  KafkaBroker broker;

  KafkaBroker::Options options(const std::string& libs) const {
    const std::string scram_user = "[name=pgoutbox-scram,password=" + scram_password + "]";
    return {.listeners = {"SSL", "SASL_SSL"},
            .properties =
                "ssl.keystore.type=PEM\n"
                "ssl.keystore.location=" +
                keystore +
                "\n"
                "ssl.truststore.type=PEM\n"
                "ssl.truststore.location=" +
                ca.cert() +
                "\n"
                "listener.name.ssl.ssl.client.auth=required\n"
                "listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN\n"
                "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config="
                "org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
                "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config="
                "org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
                "listener.name.sasl_ssl.plain.sasl.jaas.config="
                "org.apache.kafka.common.security.plain.PlainLoginModule required user_pgoutbox-plain=\"" +
                plain_password +
                "\";\n"
                "ssl.principal.mapping.rules=RULE:^CN=([^,]*).*$/$1/,DEFAULT\n"
                "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
                // The harness (PLAINTEXT) and the controller are ANONYMOUS: the super user.
                "super.users=User:ANONYMOUS\n"
                "allow.everyone.if.no.acl.found=false\n",
            .format_args = {"--add-scram", "SCRAM-SHA-512=" + scram_user, "--add-scram", "SCRAM-SHA-256=" + scram_user},
            .libs = libs};
  }

  explicit SecuredKafka(const std::string& libs) : broker(options(libs)) {
    for (const char* user : {"User:pgoutbox-mtls", "User:pgoutbox-scram", "User:pgoutbox-plain"}) {
      allow_acls(
          broker.bootstrap(), user,
          {{RD_KAFKA_RESOURCE_TOPIC, "sec_", RD_KAFKA_RESOURCE_PATTERN_PREFIXED, RD_KAFKA_ACL_OPERATION_WRITE},
           {RD_KAFKA_RESOURCE_TOPIC, "sec_", RD_KAFKA_RESOURCE_PATTERN_PREFIXED, RD_KAFKA_ACL_OPERATION_DESCRIBE},
           {RD_KAFKA_RESOURCE_BROKER, "kafka-cluster", RD_KAFKA_RESOURCE_PATTERN_LITERAL,
            RD_KAFKA_ACL_OPERATION_IDEMPOTENT_WRITE}});
    }
    for (const char* topic : {"sec_mtls", "sec_wrong", "denied_topic", "sec_scram", "sec_scram_wrong", "sec_scram_256",
                              "sec_plain", "sec_plain_wrong"}) {
      create_topic(broker.bootstrap(), topic, 1);
    }
  }
};

class KafkaSecuredTest : public ::testing::Test {
 protected:
  // The broker's jars: the default Kafka's (4.1).
  virtual std::string broker_libs() const { return ""; }

  // One broker for all tests of a suite (a start takes seconds), stopped when the suite ends.
  SecuredKafka& kafka() {
    if (!suite_kafka_) suite_kafka_ = std::make_unique<SecuredKafka>(broker_libs());
    return *suite_kafka_;
  }
  static void TearDownTestSuite() { suite_kafka_.reset(); }
  static inline std::unique_ptr<SecuredKafka> suite_kafka_;

  PgCluster& pg = shared_postgres();
  ScratchDir dir{"kafka-secured", std::nullopt};

  std::map<std::string, std::string> mtls_properties(const std::string& ca = "") {
    return {{"security.protocol", "SSL"},
            {"ssl.ca.location", ca.empty() ? kafka().ca.cert() : ca},
            {"ssl.certificate.location", kafka().client.cert},
            {"ssl.key.location", kafka().client.key}};
  }

  // The password comes from the environment, as the README tells users to pass it.
  std::map<std::string, std::string> sasl_properties(const std::string& mechanism, const std::string& user) {
    return {{"security.protocol", "SASL_SSL"},
            {"sasl.mechanisms", mechanism},
            {"sasl.username", user},
            {"ssl.ca.location", kafka().ca.cert()}};
  }
  std::map<std::string, std::string> scram_properties(const std::string& mechanism = "SCRAM-SHA-512") {
    return sasl_properties(mechanism, "pgoutbox-scram");
  }
  std::map<std::string, std::string> plain_properties() { return sasl_properties("PLAIN", "pgoutbox-plain"); }

  std::string config(const std::string& name, const std::string& topic, const std::string& listener,
                     std::map<std::string, std::string> properties) {
    pg.exec("CREATE TABLE IF NOT EXISTS " + name +
            " (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), "
            "aggregatetype text NOT NULL, aggregateid text, type text, payload jsonb)");
    PgoutboxConfig c;
    c.dsn = pg.dsn();
    c.slot = name + "_slot";
    c.publication = name + "_pub";
    c.brokers = kafka().broker.bootstrap(listener);
    c.tables.push_back({.table = "public." + name, .topic = topic});
    c.kafka_properties = std::move(properties);
    // Records a refused broker never acknowledged need not be waited for at SIGTERM.
    c.extra_yaml = "shutdown_timeout: 2s\n";
    return write_pgoutbox_config(dir.path() + "/" + name + ".yaml", c);
  }

  // Runs pgoutbox, inserts `rows` rows and returns the log once `done` holds (or 60 s passed).
  std::string run_until(const std::string& name, const std::string& cfg, std::vector<std::string> env,
                        const std::function<bool(const std::string&)>& done, int rows = 1) {
    return test::run_until({pg, dir.path(), "S", 60s}, name, cfg, std::move(env), done, rows);
  }

  // pgoutbox publishes all of 50 rows through SASL_SSL with `properties` and `password`, exactly
  // once each, `check` passes, and neither prints the password.
  void expect_every_row_published(const std::string& name, const std::string& topic,
                                  const std::map<std::string, std::string>& properties, const std::string& password) {
    const auto cfg = config(name, topic, "SASL_SSL", properties);
    const std::vector<std::string> env = {"PGOUTBOX_KAFKA_PROPERTY_SASL_PASSWORD=" + password};
    constexpr int kRows = 50;
    const auto log = run_until(
        name, cfg, env,
        [&](const std::string&) { return topic_record_count(kafka().broker.bootstrap(), topic) >= kRows; }, kRows);
    EXPECT_EQ(topic_record_count(kafka().broker.bootstrap(), topic), kRows);
    const auto check = run_pgoutbox(dir.path(), {"check", "-c", cfg, "--kafka-timeout", "5"}, env);
    EXPECT_EQ(check.exit_code, 0) << check.output;
    EXPECT_EQ(log.find(password), std::string::npos) << "the password was logged";
    EXPECT_EQ(check.output.find(password), std::string::npos) << "check printed the password";
  }
};

TEST_F(KafkaSecuredTest, PublishesThroughMutualTls) {
  const auto cfg = config("ks_mtls", "sec_mtls", "SSL", mtls_properties());
  run_until("ks_mtls", cfg, {},
            [&](const std::string&) { return topic_record_count(kafka().broker.bootstrap(), "sec_mtls") >= 1; });
  EXPECT_EQ(topic_record_count(kafka().broker.bootstrap(), "sec_mtls"), 1);
  const auto check = run_pgoutbox(dir.path(), {"check", "-c", cfg});
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

TEST_F(KafkaSecuredTest, AnUntrustedBrokerCertificateIsNamedInRunAndBlocksCheck) {
  const auto cfg = config("ks_wrong_ca", "sec_wrong", "SSL", mtls_properties(kafka().other_ca.cert()));
  const auto log = run_until("ks_wrong_ca", cfg, {}, [](const std::string& text) {
    return text.find("certificate verify failed") != std::string::npos;
  });
  EXPECT_EQ(topic_record_count(kafka().broker.bootstrap(), "sec_wrong"), 0);
  // The checkpoint read stops at the failed handshake, named, instead of waiting out its deadline.
  EXPECT_NE(log.find("checkpoint: cannot read it (no TLS connection to Kafka: "), std::string::npos) << log;
  const auto check = run_pgoutbox(dir.path(), {"check", "-c", cfg, "--kafka-timeout", "5"});
  EXPECT_EQ(check.exit_code, 1) << check.output;
  const auto line = line_starting(check.output, "FAIL  kafka");
  EXPECT_NE(line.find("certificate verify failed"), std::string::npos) << check.output;
  EXPECT_NE(line.find("ssl.*"), std::string::npos) << check.output;
}

TEST_F(KafkaSecuredTest, ATopicWithoutAnAclIsNamedInRunAndCheck) {
  const auto cfg = config("ks_no_acl", "denied_topic", "SSL", mtls_properties());
  run_until("ks_no_acl", cfg, {},
            [](const std::string& text) { return text.find("Topic authorization failed") != std::string::npos; });
  EXPECT_EQ(topic_record_count(kafka().broker.bootstrap(), "denied_topic"), 0);
  const auto check = run_pgoutbox(dir.path(), {"check", "-c", cfg});
  EXPECT_EQ(check.exit_code, 1) << check.output;
  const auto line = line_starting(check.output, "FAIL  table public.ks_no_acl: topic denied_topic");
  EXPECT_NE(line.find("Topic authorization failed"), std::string::npos) << check.output;
  EXPECT_NE(line.find("Fix: grant pgoutbox's principal WRITE and DESCRIBE on topic denied_topic"), std::string::npos)
      << check.output;
}

// docs/operating.md "Transaction timeout": exactly-once check measures the rate of a Kafka
// transaction with a producer of its own (the slot's transactional id followed by -check) and the
// configured security. ACLs that grant no transactional id refuse it: a warning that says so and
// names the grant, never a FAIL.
TEST_F(KafkaSecuredTest, CheckSaysTheTransactionRateCannotBeMeasuredWhenTheAclsRefuseItsTransactionalId) {
  create_topic(kafka().broker.bootstrap(), "sec_rate_checkpoints", 1, {{"cleanup.policy", "compact"}});
  const auto cfg = config("ks_rate", "sec_mtls", "SSL", mtls_properties());
  const std::vector<std::string> env = {"PGOUTBOX_DELIVERY=exactly-once",
                                        "PGOUTBOX_CHECKPOINT_TOPIC=sec_rate_checkpoints",
                                        "PGOUTBOX_CHECKPOINT_SIGNING_KEY=" + std::string(32, 'k')};
  const auto check = run_pgoutbox(dir.path(), {"check", "-c", cfg, "--kafka-timeout", "5"}, env);
  EXPECT_FALSE(check.printed("FAIL  kafka transaction rate")) << check.output;
  const auto line = line_starting(check.output, "WARN  kafka transaction rate: could not be measured");
  EXPECT_NE(line.find("TRANSACTIONAL_ID_AUTHORIZATION_FAILED"), std::string::npos) << check.output;
  // The id run derives from the server's system identifier, the database and the slot.
  const auto system_id = pg.query_value("SELECT system_identifier::text FROM pg_catalog.pg_control_system()");
  ASSERT_TRUE(system_id);
  EXPECT_NE(
      line.find("Fix: grant pgoutbox's principal WRITE and DESCRIBE on transactional id pgoutbox-" + *system_id + "-"),
      std::string::npos)
      << line;
  EXPECT_NE(line.find("-ks_rate_slot-check (a prefixed ACL on pgoutbox-" + *system_id), std::string::npos) << line;
  EXPECT_EQ(topic_record_count(kafka().broker.bootstrap(), "sec_rate_checkpoints"), 0) << "the probe wrote";
}

// Exactly-once under ACLs that grant one transactional id, with kafka.alternate_producers off
// (docs/delivery.md): the -alt id that instances with the option use is fenced at start where
// the ACLs allow (issue 37 item 2); here they refuse it, so no instance of the principal can have
// used it, and pgoutbox publishes with the one id it may use.
TEST_F(KafkaSecuredTest, ExactlyOnceWithOneGrantedTransactionalIdPublishesWithoutAlternateProducers) {
  create_topic(kafka().broker.bootstrap(), "sec_eos", 1);
  create_topic(kafka().broker.bootstrap(), "sec_eos_checkpoints", 1, {{"cleanup.policy", "compact"}});
  allow_acls(kafka().broker.bootstrap(), "User:pgoutbox-mtls",
             {{RD_KAFKA_RESOURCE_TOPIC, "sec_eos", RD_KAFKA_RESOURCE_PATTERN_PREFIXED, RD_KAFKA_ACL_OPERATION_READ},
              {RD_KAFKA_RESOURCE_TRANSACTIONAL_ID, "sec-eos-txn", RD_KAFKA_RESOURCE_PATTERN_LITERAL,
               RD_KAFKA_ACL_OPERATION_WRITE},
              {RD_KAFKA_RESOURCE_TRANSACTIONAL_ID, "sec-eos-txn", RD_KAFKA_RESOURCE_PATTERN_LITERAL,
               RD_KAFKA_ACL_OPERATION_DESCRIBE}});
  const auto cfg = config("ks_eos", "sec_eos", "SSL", mtls_properties());
  const std::vector<std::string> env = {
      "PGOUTBOX_DELIVERY=exactly-once", "PGOUTBOX_CHECKPOINT_TOPIC=sec_eos_checkpoints",
      "PGOUTBOX_CHECKPOINT_SIGNING_KEY=" + std::string(32, 'k'), "PGOUTBOX_KAFKA_TRANSACTIONAL_ID=sec-eos-txn",
      "PGOUTBOX_KAFKA_ALTERNATE_PRODUCERS=false"};
  constexpr int kRows = 10;
  const auto log = run_until(
      "ks_eos", cfg, env,
      [&](const std::string&) { return topic_record_count(kafka().broker.bootstrap(), "sec_eos") >= kRows; }, kRows);
  // What a read_committed consumer reads (the topic's offsets also hold the commit markers).
  EXPECT_EQ(read_topic(kafka().broker.bootstrap(), "sec_eos", kRows, 30s).size(), static_cast<std::size_t>(kRows))
      << log;
  EXPECT_EQ(log.find("initialising Kafka transactions"), std::string::npos) << log;
  EXPECT_NE(log.find("sec-eos-txn-alt is refused by the ACLs"), std::string::npos) << log;
}

TEST_F(KafkaSecuredTest, PublishesThroughSaslSslScramSha512) {
  expect_every_row_published("ks_scram", "sec_scram", scram_properties("SCRAM-SHA-512"), kafka().scram_password);
}

TEST_F(KafkaSecuredTest, PublishesThroughSaslSslScramSha256) {
  expect_every_row_published("ks_scram_256", "sec_scram_256", scram_properties("SCRAM-SHA-256"),
                             kafka().scram_password);
}

TEST_F(KafkaSecuredTest, AWrongSaslPasswordIsNamedInRunAndBlocksCheckWithoutBeingPrinted) {
  const auto cfg = config("ks_scram_wrong", "sec_scram_wrong", "SASL_SSL", scram_properties());
  const std::string wrong = random_password();
  const std::vector<std::string> env = {"PGOUTBOX_KAFKA_PROPERTY_SASL_PASSWORD=" + wrong};
  // Whichever client logs in first (the checkpoint reader or the producer) names the fix.
  const auto log = run_until("ks_scram_wrong", cfg, env, [](const std::string& text) {
    return text.find("Fix: check kafka.properties.sasl.username and the password") != std::string::npos;
  });
  EXPECT_EQ(topic_record_count(kafka().broker.bootstrap(), "sec_scram_wrong"), 0);
  EXPECT_NE(log.find("invalid credentials with SASL mechanism SCRAM-SHA-512"), std::string::npos) << log;
  EXPECT_NE(log.find(test::kCheckpointLoginRefused), std::string::npos) << log;
  EXPECT_NE(log.find("Fix: check kafka.properties.sasl.username and the password"), std::string::npos) << log;
  const auto check = run_pgoutbox(dir.path(), {"check", "-c", cfg, "--kafka-timeout", "5"}, env);
  EXPECT_EQ(check.exit_code, 1) << check.output;
  const auto fail = line_starting(check.output, "FAIL  kafka");
  EXPECT_NE(fail.find("invalid credentials"), std::string::npos) << check.output;
  EXPECT_NE(fail.find("Fix: check kafka.properties.sasl.username and the password"), std::string::npos) << check.output;
  for (const auto& secret : {wrong, kafka().scram_password}) {
    EXPECT_EQ(log.find(secret), std::string::npos) << "a password was logged";
    EXPECT_EQ(check.output.find(secret), std::string::npos) << "check printed a password";
  }
}

TEST_F(KafkaSecuredTest, PublishesThroughSaslSslPlain) {
  expect_every_row_published("ks_plain", "sec_plain", plain_properties(), kafka().plain_password);
}

TEST_F(KafkaSecuredTest, AWrongPlainPasswordIsNamedInRunAndBlocksCheckWithoutBeingPrinted) {
  const auto cfg = config("ks_plain_wrong", "sec_plain_wrong", "SASL_SSL", plain_properties());
  const std::string wrong = random_password();
  const std::vector<std::string> env = {"PGOUTBOX_KAFKA_PROPERTY_SASL_PASSWORD=" + wrong};
  const std::string fix = "Fix: check kafka.properties.sasl.username and the password";
  const auto log = run_until("ks_plain_wrong", cfg, env,
                             [&](const std::string& text) { return text.find(fix) != std::string::npos; });
  EXPECT_EQ(topic_record_count(kafka().broker.bootstrap(), "sec_plain_wrong"), 0);
  EXPECT_NE(log.find("Invalid username or password"), std::string::npos) << log;
  EXPECT_NE(log.find(test::kCheckpointLoginRefused), std::string::npos) << log;
  EXPECT_NE(log.find("user_<name> entries of the listener's sasl.jaas.config"), std::string::npos) << log;
  const auto check = run_pgoutbox(dir.path(), {"check", "-c", cfg, "--kafka-timeout", "5"}, env);
  EXPECT_EQ(check.exit_code, 1) << check.output;
  const auto fail = line_starting(check.output, "FAIL  kafka");
  EXPECT_NE(fail.find("Invalid username or password"), std::string::npos) << check.output;
  EXPECT_NE(fail.find(fix), std::string::npos) << check.output;
  for (const auto& secret : {wrong, kafka().plain_password}) {
    EXPECT_EQ(log.find(secret), std::string::npos) << "a password was logged";
    EXPECT_EQ(check.output.find(secret), std::string::npos) << "check printed a password";
  }
}

// The older brokers of the version matrix: SCRAM against Kafka 3.9 (the last 3.x) and 4.1.
class KafkaSecured39Test : public KafkaSecuredTest {
 protected:
  std::string broker_libs() const override { return kafka_3_9_libs(); }
};

TEST_F(KafkaSecured39Test, PublishesThroughSaslSslScramSha512) {
  expect_every_row_published("ks39_scram", "sec_scram", scram_properties("SCRAM-SHA-512"), kafka().scram_password);
}

TEST_F(KafkaSecured39Test, PublishesThroughSaslSslScramSha256) {
  expect_every_row_published("ks39_scram_256", "sec_scram_256", scram_properties("SCRAM-SHA-256"),
                             kafka().scram_password);
}

class KafkaSecured41Test : public KafkaSecuredTest {
 protected:
  std::string broker_libs() const override { return kafka_4_1_libs(); }
};

TEST_F(KafkaSecured41Test, PublishesThroughSaslSslScramSha512) {
  expect_every_row_published("ks41_scram", "sec_scram", scram_properties("SCRAM-SHA-512"), kafka().scram_password);
}

TEST_F(KafkaSecured41Test, PublishesThroughSaslSslScramSha256) {
  expect_every_row_published("ks41_scram_256", "sec_scram_256", scram_properties("SCRAM-SHA-256"),
                             kafka().scram_password);
}

}  // namespace
}  // namespace pgoutbox::test
