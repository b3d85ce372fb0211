// pgoutbox publishing to a Kafka that only admits authenticated clients: an SSL listener that
// requires client certificates, with the standard authorizer on and ACLs that let pgoutbox's
// user write only its own topics. An untrusted broker certificate and a topic without an ACL
// each say so in `run`, and `check` blocks on them (naming the missing ACL).
//
// Not here yet: SASL_SSL with SCRAM-SHA-512. A user made with `kafka-storage format --add-scram`
// is in the bootstrap metadata, yet Kafka 4.1.1 refused its password ("invalid credentials")
// for librdkafka and kcat alike; see the README's "Secured connections".
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <sstream>

#include "../app/operator_fixture.h"
#include "eventually.h"
#include "kafka_client.h"
#include "pgoutbox_process.h"
#include "services.h"
#include "test_ca.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

struct SecuredKafka {
  ScratchDir certs{"kafka-tls", std::nullopt};
  TestCa ca{certs.path(), "ca"};
  TestCa other_ca{certs.path(), "other-ca"};
  TestCa::Issued broker_cert = ca.issue("broker", "localhost", "DNS:localhost,IP:127.0.0.1");
  TestCa::Issued client = ca.issue("client", "pgoutbox-mtls");
  std::string keystore = concatenate(certs.path() + "/broker.pem", {broker_cert.key, broker_cert.cert});
  KafkaBroker broker{KafkaBroker::Options{
      .listeners = {"SSL"},
      .properties = "ssl.keystore.type=PEM\n"
                    "ssl.keystore.location=" +
                    keystore +
                    "\n"
                    "ssl.truststore.type=PEM\n"
                    "ssl.truststore.location=" +
                    ca.cert() +
                    "\n"
                    "listener.name.ssl.ssl.client.auth=required\n"
                    "ssl.principal.mapping.rules=RULE:^CN=([^,]*).*$/$1/,DEFAULT\n"
                    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
                    // The harness (PLAINTEXT) and the controller are ANONYMOUS: the super user.
                    "super.users=User:ANONYMOUS\n"
                    "allow.everyone.if.no.acl.found=false\n",
      .format_args = {}}};

  static std::string concatenate(const std::string& out_path, const std::vector<std::string>& parts) {
    std::ofstream out(out_path);
    for (const auto& part : parts) {
      std::ifstream in(part);
      out << in.rdbuf();
    }
    return out_path;
  }

  SecuredKafka() {
    for (const char* user : {"User:pgoutbox-mtls"}) {
      allow_acls(
          broker.bootstrap(), user,
          {{RD_KAFKA_RESOURCE_TOPIC, "sec_", RD_KAFKA_RESOURCE_PATTERN_PREFIXED, RD_KAFKA_ACL_OPERATION_WRITE},
           {RD_KAFKA_RESOURCE_TOPIC, "sec_", RD_KAFKA_RESOURCE_PATTERN_PREFIXED, RD_KAFKA_ACL_OPERATION_DESCRIBE},
           {RD_KAFKA_RESOURCE_BROKER, "kafka-cluster", RD_KAFKA_RESOURCE_PATTERN_LITERAL,
            RD_KAFKA_ACL_OPERATION_IDEMPOTENT_WRITE}});
    }
    for (const char* topic : {"sec_mtls", "sec_wrong", "denied_topic"}) create_topic(broker.bootstrap(), topic, 1);
  }
};

class KafkaSecuredTest : public ::testing::Test {
 protected:
  static SecuredKafka& kafka() {
    static SecuredKafka instance;
    return instance;
  }

  PgCluster& pg = shared_postgres();
  ScratchDir dir{"kafka-secured", std::nullopt};

  std::map<std::string, std::string> mtls_properties(const std::string& ca = "") {
    return {{"security.protocol", "SSL"},
            {"ssl.ca.location", ca.empty() ? kafka().ca.cert() : ca},
            {"ssl.certificate.location", kafka().client.cert},
            {"ssl.key.location", kafka().client.key}};
  }

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
    return write_pgoutbox_config(dir.path() + "/" + name + ".yaml", c);
  }

  std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // Runs pgoutbox, inserts one row and returns the log once `done` holds (or 60 s passed).
  std::string run_until(const std::string& name, const std::string& cfg, std::vector<std::string> env,
                        const std::function<bool(const std::string&)>& done) {
    const std::string log = dir.path() + "/" + name + ".log";
    PgoutboxProcess process(PGOUTBOX_BINARY, cfg, log, env);
    PGOUTBOX_EXPECT_EVENTUALLY(
        pg.query_value("SELECT active FROM pg_replication_slots WHERE slot_name = '" + name + "_slot'") == "t", 60s);
    pg.exec("INSERT INTO " + name + " (aggregatetype, aggregateid, payload) VALUES ('S', 'k', '{}')");
    PGOUTBOX_EXPECT_EVENTUALLY(done(read_file(log)), 60s) << read_file(log);
    process.signal(SIGTERM);
    if (!process.wait_exit(30s)) process.kill9();
    pg.drop_slot_when_free(name + "_slot");
    return read_file(log);
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
  run_until("ks_wrong_ca", cfg, {},
            [](const std::string& text) { return text.find("certificate verify failed") != std::string::npos; });
  EXPECT_EQ(topic_record_count(kafka().broker.bootstrap(), "sec_wrong"), 0);
  const auto check = run_pgoutbox(dir.path(), {"check", "-c", cfg, "--kafka-timeout", "5"});
  EXPECT_EQ(check.exit_code, 1) << check.output;
  EXPECT_NE(line_starting(check.output, "FAIL  kafka").find("ssl.*"), std::string::npos) << check.output;
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

}  // namespace
}  // namespace pgoutbox::test
