#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "child_process.h"

namespace pgoutbox::test {

// The jars of the older brokers of the version matrix, for KafkaBroker::Options::libs: Kafka 3.9
// (third_party/kafka-3.9/pom.xml, in .deps/kafka-3.9/libs), the last before 4.0, and Kafka 4.1
// (third_party/kafka-4.1, .deps/kafka-4.1/libs). Every version takes the same configuration and
// formatting.
std::string kafka_3_9_libs();
std::string kafka_4_1_libs();

// A real single-node Apache Kafka in KRaft mode (combined broker + controller), from the jars
// scripts/setup.sh placed in .deps/kafka/libs (Kafka 4.4) or another version's, on free loopback
// ports, with a small heap and warnings-only logs. Can be stopped, killed, frozen and restarted
// mid-test; keeps its data.
class KafkaBroker {
 public:
  // A listener beside PLAINTEXT (which the harness uses, and which a secured test makes its super
  // user's): its name is also its security protocol (SASL_SSL, SSL).
  struct Options {
    std::vector<std::string> listeners;
    std::string properties;                  // more server.properties lines
    std::vector<std::string> format_args{};  // more `kafka-storage format` arguments (--add-scram …)
    std::string libs{};                      // the broker's jars; empty: the default Kafka's
    // JVM system properties ("name=value", passed as -D), for settings Kafka reads only there,
    // such as the OAuth URL allow-list org.apache.kafka.sasl.oauthbearer.allowed.urls.
    std::vector<std::string> system_properties{};
  };

  KafkaBroker();
  explicit KafkaBroker(const Options& options);
  ~KafkaBroker();
  KafkaBroker(const KafkaBroker&) = delete;
  KafkaBroker& operator=(const KafkaBroker&) = delete;

  void start();  // returns once a metadata request succeeds
  void stop();   // controlled shutdown (SIGTERM)
  void kill9();
  void pause();   // SIGSTOP: the broker hangs with its sockets open
  void resume();  // SIGCONT
  void restart() {
    stop();
    start();
  }
  bool running();
  pid_t pid() const { return server_.pid(); }

  // "127.0.0.1:PORT", for bootstrap.servers: the PLAINTEXT listener, or the one named.
  std::string bootstrap() const;
  std::string bootstrap(const std::string& listener) const;
  const std::string& log_path() const { return log_path_; }

  // True when a metadata request answers within `timeout`.
  bool answers_metadata(std::chrono::milliseconds timeout) const;

  // Runs one of Kafka's own command-line tools (a main class of its jars, e.g.
  // kafka.admin.ConfigCommand) to its end, its output in `log_path`: its exit code, or -1 when it
  // did not exit normally within `timeout`.
  int run_tool(const std::string& main_class, const std::vector<std::string>& args, const std::string& log_path,
               std::chrono::seconds timeout = std::chrono::seconds(120)) const;

 private:
  std::string libs_;
  std::vector<std::string> system_properties_;
  ScratchDir scratch_;
  std::string log_path_;
  std::string config_path_;
  int port_;
  int controller_port_;
  std::map<std::string, int> listener_ports_;
  ChildProcess server_;
};

}  // namespace pgoutbox::test
