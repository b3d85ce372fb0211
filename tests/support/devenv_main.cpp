// pgoutbox-devenv: the tests' throwaway Postgres and Kafka, started the same way, for the demo
// and for trying pgoutbox by hand. Prints where they listen, writes them to an env file, and
// runs until Ctrl-C (or --seconds), then removes everything it started.
//
// While it runs, SIGUSR1 stops Kafka (a controlled shutdown, data kept) and SIGUSR2 starts it
// again on the same port; --kafka-state-file then holds "up" or "down" once the change is done.
// Subcommands `count` and `create-topic` are small clients for scripts.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "kafka_broker.h"
#include "kafka_client.h"
#include "pg_cluster.h"

namespace {

// 0: nothing asked; SIGUSR1 / SIGUSR2: the last request, taken by the main loop.
std::atomic<int> kafka_request{0};

extern "C" void on_kafka_request(int sig) { kafka_request.store(sig); }

void install_kafka_control() {
  struct sigaction action {};
  action.sa_handler = on_kafka_request;
  sigemptyset(&action.sa_mask);
  sigaction(SIGUSR1, &action, nullptr);
  sigaction(SIGUSR2, &action, nullptr);
}

// Replaces the file atomically, so a script polling it never reads half a word.
void write_atomically(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
  }
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Starts a throwaway PostgreSQL 15 (wal_level=logical) and a single-node Kafka on loopback"};
  app.name("pgoutbox-devenv");
  std::string env_file, kafka_state_file;
  int seconds = 0;
  app.add_option("--env-file", env_file, "write PGOUTBOX_PG_DSN and PGOUTBOX_KAFKA_BOOTSTRAP here once both are up");
  app.add_option("--kafka-state-file", kafka_state_file,
                 "write \"up\" or \"down\" here whenever Kafka has started or stopped (SIGUSR2 / SIGUSR1)");
  app.add_option("--seconds", seconds, "stop after this many seconds (0: until SIGINT/SIGTERM)");
  std::string bootstrap, topic;
  int partitions = 1;
  auto* count =
      app.add_subcommand("count", "print how many records a topic holds (sum of its partitions' end offsets)");
  count->add_option("--bootstrap", bootstrap)->required();
  count->add_option("--topic", topic)->required();
  auto* create = app.add_subcommand("create-topic", "create a topic (no error when it exists)");
  create->add_option("--bootstrap", bootstrap)->required();
  create->add_option("--topic", topic)->required();
  create->add_option("--partitions", partitions)->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (count->parsed()) {
    std::printf("%lld\n", static_cast<long long>(pgoutbox::test::topic_record_count(bootstrap, topic)));
    return 0;
  }
  if (create->parsed()) {
    try {
      pgoutbox::test::create_topic(bootstrap, topic, partitions);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "pgoutbox-devenv: %s\n", e.what());
      return 1;
    }
    return 0;
  }

  install_kafka_control();
  try {
    pgoutbox::test::PgCluster postgres;
    std::printf("postgres: %s\n", postgres.dsn().c_str());
    std::fflush(stdout);
    pgoutbox::test::KafkaBroker kafka;
    std::printf("kafka:    %s\n", kafka.bootstrap().c_str());
    write_atomically(kafka_state_file, "up\n");
    if (!env_file.empty()) {
      write_atomically(env_file, "PGOUTBOX_PG_DSN='" + postgres.dsn() + "'\n" + "PGOUTBOX_KAFKA_BOOTSTRAP='" +
                                     kafka.bootstrap() + "'\n" + "PGOUTBOX_PG_LOG='" + postgres.log_path() + "'\n" +
                                     "PGOUTBOX_KAFKA_LOG='" + kafka.log_path() + "'\n");
    }
    std::printf("ready\n");
    std::fflush(stdout);
    // The harness's signal handler kills both services and removes their files on SIGINT/SIGTERM.
    bool kafka_up = true;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (seconds == 0 || std::chrono::steady_clock::now() < until) {
      const int request = kafka_request.exchange(0);
      if (request == SIGUSR1 && kafka_up) {
        kafka.stop();
        kafka_up = false;
        std::printf("kafka stopped\n");
        write_atomically(kafka_state_file, "down\n");
      } else if (request == SIGUSR2 && !kafka_up) {
        kafka.start();
        kafka_up = true;
        std::printf("kafka started\n");
        write_atomically(kafka_state_file, "up\n");
      }
      std::fflush(stdout);
      if (!postgres.running() || (kafka_up && !kafka.running())) {
        std::fprintf(stderr, "a service exited unexpectedly (logs: %s, %s)\n", postgres.log_path().c_str(),
                     kafka.log_path().c_str());
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pgoutbox-devenv: %s\n", e.what());
    return 1;
  }
  return 0;
}
