#pragma once

#include <chrono>
#include <string>

#include "child_process.h"

namespace pgoutbox::test {

// A real single-node Apache Kafka in KRaft mode (combined broker + controller), from the jars
// scripts/setup.sh placed in .deps/kafka/libs, on free loopback ports, with a small heap and
// warnings-only logs. Can be stopped, killed, frozen and restarted mid-test; keeps its data.
class KafkaBroker {
 public:
  KafkaBroker();
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

  // "127.0.0.1:PORT", for bootstrap.servers.
  std::string bootstrap() const;
  const std::string& log_path() const { return log_path_; }

  // True when a metadata request answers within `timeout`.
  bool answers_metadata(std::chrono::milliseconds timeout) const;

 private:
  ScratchDir scratch_;
  std::string log_path_;
  std::string config_path_;
  int port_;
  int controller_port_;
  ChildProcess server_;
};

}  // namespace pgoutbox::test
