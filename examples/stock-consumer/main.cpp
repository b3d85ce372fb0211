// stock-consumer: the stock service's idempotent consumer of outbox.event.order.
//
//   stock-consumer --brokers 127.0.0.1:9092 --dsn "host=... dbname=stock"
//                  [--backoff 5s,30s,2m,10m] [--stats-file FILE]
//
// Per record: one local transaction that claims the event id in consumer_log and reserves the
// stock, then the offset commit. Duplicates are skipped, business rejections become a
// compensating event, poison goes to the dead-letter topic, transient database failures are
// retried on the backoff schedule. SIGINT/SIGTERM: finish the record in hand, commit, leave.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "duration.h"
#include "stock_consumer.h"
#include "stop_signal.h"

int main(int argc, char** argv) {
  CLI::App app{"Consumes order events into the stock database, idempotently"};
  app.name("stock-consumer");
  shop::ConsumerSettings settings;
  std::string backoff = "5s,30s,2m,10m";
  std::string log_level = "info";
  app.add_option("--brokers", settings.brokers, "Kafka bootstrap servers")->required();
  app.add_option("--dsn", settings.dsn, "libpq connection string of the stock database")->required();
  app.add_option("--topic", settings.topic, "topic of the order events")->capture_default_str();
  app.add_option("--group", settings.group, "consumer group, also the consumer name in consumer_log")
      ->capture_default_str();
  app.add_option("--dlq-topic", settings.dlq_topic, "where malformed records go")->capture_default_str();
  app.add_option("--reject-topic", settings.reject_topic, "where compensating events for rejected orders go")
      ->capture_default_str();
  app.add_option("--backoff", backoff, "waits between retries of a transient database failure, then dead-letter")
      ->capture_default_str();
  app.add_option("--stats-file", settings.stats_file, "rewrite counters (NAME=value lines) here every second");
  std::vector<std::string> properties;
  app.add_option("--kafka-property", properties, "an extra librdkafka consumer property NAME=VALUE (repeatable)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const auto delays = shop::parse_duration_list(backoff);
  if (!delays || delays->empty()) {
    std::fprintf(stderr, "stock-consumer: --backoff wants durations such as 5s,30s,2m,10m\n");
    return 2;
  }
  settings.retry = shop::RetrySchedule(*delays);
  for (const auto& property : properties) {
    const auto eq = property.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "stock-consumer: --kafka-property wants NAME=VALUE, got %s\n", property.c_str());
      return 2;
    }
    settings.kafka_properties.emplace_back(property.substr(0, eq), property.substr(eq + 1));
  }
  if (settings.group.empty() || settings.group.size() > 64) {
    std::fprintf(stderr, "stock-consumer: --group must be 1 to 64 characters (it is consumer_log.consumer)\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(log_level));
  shop::install_stop_handlers();
  try {
    shop::StockConsumer consumer(std::move(settings));
    return consumer.run();
  } catch (const std::exception& e) {
    spdlog::error("stock-consumer: {}", e.what());
    return 1;
  }
}
