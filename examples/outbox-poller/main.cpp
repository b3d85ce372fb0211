// outbox-poller: the polling relay the seeds' systems run before pgoutbox, over the local message
// table (examples/sql/local_message.sql). It is what the cutover (scripts/cutover-demo.sh, README
// "Switching from a polling relay") replaces.
//
//   outbox-poller --dsn "host=... dbname=shop" --brokers 127.0.0.1:9092 [--batch 50] [--interval 200ms]
//
// Like the seeds' scheduled job (a fixed delay between runs), it waits --interval after every
// poll: at most --batch rows per --interval, the ceiling a poller under load runs into.
// SIGINT/SIGTERM: finish the batch in hand (published and marked), leave.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "batch_publisher.h"
#include "duration.h"
#include "poller.h"
#include "stop_signal.h"

int main(int argc, char** argv) {
  CLI::App app{"Publishes local_message rows still NEW to Kafka, then marks them SENT"};
  app.name("outbox-poller");
  std::string dsn, brokers, topic_prefix = "outbox.event.", interval_text = "200ms", delivery_timeout_text = "30s",
                            stats_file;
  int batch_size = 50;
  int max_retries = 10;
  std::vector<std::string> properties;
  app.add_option("--dsn", dsn, "libpq connection string of the shop database")->required();
  app.add_option("--brokers", brokers, "Kafka bootstrap servers")->required();
  app.add_option("--topic-prefix", topic_prefix, "topic = this + aggregatetype")->capture_default_str();
  app.add_option("--batch", batch_size, "rows claimed per poll")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--interval", interval_text, "wait between two polls")->capture_default_str();
  app.add_option("--max-retries", max_retries, "rows that failed this often are left NEW for an operator")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--delivery-timeout", delivery_timeout_text, "give up on a row's ack after this (retried later)")
      ->capture_default_str();
  app.add_option("--stats-file", stats_file, "rewrite counters (NAME=value lines) here after every batch");
  app.add_option("--kafka-property", properties, "an extra librdkafka producer property NAME=VALUE (repeatable)");
  CLI11_PARSE(app, argc, argv);
  const auto interval = shop::parse_duration(interval_text);
  const auto delivery_timeout = shop::parse_duration(delivery_timeout_text);
  if (!interval || !delivery_timeout) {
    std::fprintf(stderr, "outbox-poller: --interval and --delivery-timeout want durations such as 200ms or 30s\n");
    return 2;
  }
  std::map<std::string, std::string> kafka_properties;
  for (const auto& property : properties) {
    const auto eq = property.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "outbox-poller: --kafka-property wants NAME=VALUE, not %s\n", property.c_str());
      return 2;
    }
    kafka_properties[property.substr(0, eq)] = property.substr(eq + 1);
  }

  shop::install_stop_handlers();
  try {
    shop::PgConnection db(dsn);
    shop::BatchPublisher publisher(brokers, topic_prefix, *delivery_timeout, kafka_properties);
    shop::Poller poller(db, publisher, batch_size, max_retries);
    shop::PollerStats stats;
    while (!shop::stop_requested()) {
      int claimed = 0;
      try {
        db.ensure_connected();
        claimed = poller.poll_once(stats);
      } catch (const shop::PgError& e) {
        // The batch rolled back: its rows are NEW again, and some may be in Kafka already.
        std::fprintf(stderr, "outbox-poller: poll failed: %s\n", e.what());
        shop::sleep_unless_stopped(std::chrono::seconds(1));
        continue;
      }
      if (!stats_file.empty() && claimed > 0) stats.write_file(stats_file);
      shop::sleep_unless_stopped(*interval);
    }
    std::printf("published %lld in %lld batches, %lld failed (done)\n", static_cast<long long>(stats.published),
                static_cast<long long>(stats.batches), static_cast<long long>(stats.failed));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "outbox-poller: %s\n", e.what());
    return 1;
  }
  return 0;
}
