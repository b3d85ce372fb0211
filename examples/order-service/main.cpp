// order-service: places orders at a steady rate, each with its outbox event in one transaction.
//
//   order-service --dsn "host=... dbname=shop" --rate 50 --seconds 60 [--event-table local_message]
//
// Prints how many orders it wrote every few seconds and at the end. Keeps accepting orders
// whatever Kafka does: the events wait in the outbox (and the WAL) until pgoutbox relays them.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include "order_writer.h"
#include "stop_signal.h"

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Writes orders and their outbox events, one transaction each"};
  app.name("order-service");
  std::string dsn;
  double rate = 50;
  int seconds = 0;
  long count = 0;
  int sku_count = 20;
  int max_quantity = 3;
  shop::OrderWriter::EventTable event_table = shop::OrderWriter::EventTable::outbox;
  const std::map<std::string, shop::OrderWriter::EventTable> event_tables{
      {"outbox", shop::OrderWriter::EventTable::outbox},
      {"local_message", shop::OrderWriter::EventTable::local_message}};
  app.add_option("--dsn", dsn, "libpq connection string of the shop database")->required();
  app.add_option("--rate", rate, "orders per second")->check(CLI::PositiveNumber);
  app.add_option("--seconds", seconds, "stop after this many seconds (0: no limit)")->check(CLI::NonNegativeNumber);
  app.add_option("--count", count, "stop after this many orders (0: no limit)")->check(CLI::NonNegativeNumber);
  app.add_option("--skus", sku_count, "order from SKU-1 .. SKU-N")->check(CLI::PositiveNumber);
  app.add_option("--max-quantity", max_quantity, "quantities from 1 to this")->check(CLI::PositiveNumber);
  app.add_option("--event-table", event_table, "outbox (pgoutbox), or local_message (a polling relay, NEW/SENT)")
      ->transform(CLI::CheckedTransformer(event_tables));
  CLI11_PARSE(app, argc, argv);

  shop::install_stop_handlers();
  std::unique_ptr<shop::PgConnection> db;
  try {
    db = std::make_unique<shop::PgConnection>(dsn);
  } catch (const shop::PgError& e) {
    std::fprintf(stderr, "order-service: %s\n", e.what());
    return 1;
  }
  shop::OrderWriter writer(*db, sku_count, max_quantity, event_table);

  const auto started = Clock::now();
  const auto interval = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / rate));
  auto next = started;
  auto next_report = started + std::chrono::seconds(5);
  long written = 0, failed = 0;
  while (!shop::stop_requested()) {
    if (count > 0 && written >= count) break;
    if (seconds > 0 && Clock::now() - started >= std::chrono::seconds(seconds)) break;
    try {
      db->ensure_connected();
      writer.place_random_order();
      ++written;
    } catch (const shop::PgError& e) {
      // Nothing half-written can exist: the order and its event were one transaction.
      ++failed;
      std::fprintf(stderr, "order-service: order not placed: %s\n", e.what());
      shop::sleep_unless_stopped(std::chrono::seconds(1));
    }
    if (Clock::now() >= next_report) {
      std::printf("orders written %ld, failed %ld\n", written, failed);
      std::fflush(stdout);
      next_report += std::chrono::seconds(5);
    }
    next += interval;
    const auto now = Clock::now();
    if (next > now) {
      shop::sleep_unless_stopped(std::chrono::duration_cast<std::chrono::milliseconds>(next - now));
    } else if (now - next > std::chrono::seconds(1)) {
      next = now;  // fell behind (e.g. the database was away): don't burst to catch up
    }
  }
  std::printf("orders written %ld, failed %ld (done)\n", written, failed);
  return 0;
}
