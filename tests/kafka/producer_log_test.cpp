// A broker that refuses connections: librdkafka reports each failure to both its log callback
// (facility FAIL, at error) and its error callback. The operator should read it once, at warn.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include "pgoutbox/kafka/producer.h"

namespace pgoutbox::kafka {
namespace {

using namespace std::chrono_literals;

// A loopback port that was free a moment ago: connecting to it is refused.
int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST(ProducerLog, EachConnectionFailureIsLoggedOnceAtWarn) {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000);
  auto logger = std::make_shared<spdlog::logger>("capture", sink);
  logger->set_pattern("%l %v");
  logger->set_level(spdlog::level::trace);
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(logger);
  {
    ProducerSettings settings;
    settings.brokers = "127.0.0.1:" + std::to_string(closed_port());
    // One attempt per second at most, so the window holds a few failures.
    settings.properties = {{"reconnect.backoff.ms", "1000"}, {"reconnect.backoff.max.ms", "1000"}};
    Producer producer(settings, [](const DeliveryReport&) {});
    const auto until = std::chrono::steady_clock::now() + 2500ms;
    while (std::chrono::steady_clock::now() < until) {
      producer.poll();
      std::this_thread::sleep_for(50ms);
    }
  }
  spdlog::set_default_logger(previous);

  std::vector<std::string> refused;
  for (const auto& line : sink->last_formatted()) {
    if (line.find("refused") == std::string::npos) continue;
    refused.push_back(line);
    EXPECT_EQ(line.rfind("warning ", 0), 0U) << "a connection failure is a warning: " << line;
  }
  ASSERT_FALSE(refused.empty()) << "the failure must be logged";
  // Every failure reached the log once: its text ("Connect to ipv4#… failed: Connection refused …")
  // is not on the line before too (once through the log callback, once through the error one).
  const auto failure_text = [](const std::string& line) {
    const auto at = line.find("Connect to");
    return at == std::string::npos ? line : line.substr(at);
  };
  for (std::size_t i = 1; i < refused.size(); ++i) {
    EXPECT_NE(failure_text(refused[i - 1]), failure_text(refused[i])) << "the same failure twice:\n"
                                                                      << refused[i - 1] << "\n"
                                                                      << refused[i];
  }
}

// A refused SASL login: the fix names where the credentials come from; with SCRAM, where the
// cluster keeps its users; with PLAIN, where Kafka's own login module keeps them.
TEST(AuthenticationFix, NamesTheCredentialsAndWhereTheMechanismKeepsItsUsers) {
  const auto scram = authentication_fix({{"sasl.mechanisms", "scram-sha-512"}, {"sasl.username", "pgoutbox"}});
  EXPECT_NE(scram.find("SASL mechanism SCRAM-SHA-512"), std::string::npos) << scram;
  EXPECT_NE(scram.find("PGOUTBOX_KAFKA_PROPERTY_SASL_PASSWORD"), std::string::npos) << scram;
  EXPECT_NE(scram.find("kafka-configs.sh --describe --entity-type users"), std::string::npos) << scram;
  const auto plain = authentication_fix({{"sasl.mechanism", "PLAIN"}});
  EXPECT_NE(plain.find("SASL mechanism PLAIN"), std::string::npos) << plain;
  EXPECT_NE(plain.find("user_<name> entries of the listener's sasl.jaas.config"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("kafka-configs.sh"), std::string::npos) << plain;
}

// OAUTHBEARER with OIDC has no username or password: the fix names the client at the identity
// provider, the token endpoint, the clocks and what the broker expects of the token.
TEST(AuthenticationFix, NamesTheIdentityProviderSideForOidc) {
  const auto oidc = authentication_fix({{"sasl.mechanisms", "OAUTHBEARER"},
                                        {"sasl.oauthbearer.method", "oidc"},
                                        {"sasl.oauthbearer.token.endpoint.url", "https://idp.example/token"}});
  for (const char* part : {"sasl.oauthbearer.client.id", "PGOUTBOX_KAFKA_PROPERTY_SASL_OAUTHBEARER_CLIENT_SECRET",
                           "(https://idp.example/token)", "NTP", "sasl.oauthbearer.scope", "expected.audience"}) {
    EXPECT_NE(oidc.find(part), std::string::npos) << part << " missing: " << oidc;
  }
  EXPECT_EQ(oidc.find("sasl.username"), std::string::npos) << oidc;
  const auto unsecured = authentication_fix({{"sasl.mechanism", "oauthbearer"}});
  EXPECT_NE(unsecured.find("sasl.oauthbearer.method=oidc"), std::string::npos) << unsecured;
}

}  // namespace
}  // namespace pgoutbox::kafka
