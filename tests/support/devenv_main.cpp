// pgoutbox-devenv: the tests' throwaway Postgres and Kafka, started the same way, for the demo
// and for trying pgoutbox by hand. Prints where they listen, writes them to an env file, and
// runs until Ctrl-C (or --seconds), then removes everything it started.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "kafka_broker.h"
#include "kafka_client.h"
#include "pg_cluster.h"

int main(int argc, char** argv) {
  CLI::App app{"Starts a throwaway PostgreSQL 15 (wal_level=logical) and a single-node Kafka on loopback"};
  app.name("pgoutbox-devenv");
  std::string env_file;
  int seconds = 0;
  app.add_option("--env-file", env_file, "write PGOUTBOX_PG_DSN and PGOUTBOX_KAFKA_BOOTSTRAP here once both are up");
  app.add_option("--seconds", seconds, "stop after this many seconds (0: until SIGINT/SIGTERM)");
  std::string bootstrap, topic;
  auto* count = app.add_subcommand("count", "print how many records a topic holds (sum of its partitions' end offsets)");
  count->add_option("--bootstrap", bootstrap)->required();
  count->add_option("--topic", topic)->required();
  CLI11_PARSE(app, argc, argv);
  if (count->parsed()) {
    std::printf("%lld\n", static_cast<long long>(pgoutbox::test::topic_record_count(bootstrap, topic)));
    return 0;
  }

  try {
    pgoutbox::test::PgCluster postgres;
    std::printf("postgres: %s\n", postgres.dsn().c_str());
    std::fflush(stdout);
    pgoutbox::test::KafkaBroker kafka;
    std::printf("kafka:    %s\n", kafka.bootstrap().c_str());
    if (!env_file.empty()) {
      const std::string tmp = env_file + ".tmp";
      std::ofstream out(tmp, std::ios::trunc);
      out << "PGOUTBOX_PG_DSN='" << postgres.dsn() << "'\n"
          << "PGOUTBOX_KAFKA_BOOTSTRAP='" << kafka.bootstrap() << "'\n"
          << "PGOUTBOX_PG_LOG='" << postgres.log_path() << "'\n"
          << "PGOUTBOX_KAFKA_LOG='" << kafka.log_path() << "'\n";
      out.close();
      std::rename(tmp.c_str(), env_file.c_str());
    }
    std::printf("ready\n");
    std::fflush(stdout);
    // The harness's signal handler kills both services and removes their files on SIGINT/SIGTERM.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (seconds == 0 || std::chrono::steady_clock::now() < until) {
      if (!postgres.running() || !kafka.running()) {
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
