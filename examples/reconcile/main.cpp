// reconcile: compares the order service's orders with the stock service's movements and lists
// every order whose event never took effect and every one that took effect twice; also checks
// each SKU's stock against its movements. Exit 0 when all agree, 1 when not, 2 on an error.
//
//   reconcile --orders-dsn "host=... dbname=shop" --stock-dsn "host=... dbname=stock" [--grace 5m]
//
// --grace leaves out orders younger than that: their events may still be on their way.
//
// After a cutover from the polling relay (docs/migrating.md "Switching from a polling relay"), --cutover
// checks the shop's local_message table against the topic: every row's id must be in it; each
// row in it more than once is listed with why. With --stock-dsn the consumer's side is checked
// too, as without --cutover. --grace does not apply to it: run it once the relays have drained
// (a row still on its way is reported lost).
//
//   reconcile --cutover --orders-dsn "host=... dbname=shop" --brokers 127.0.0.1:9092 [--stock-dsn ...]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "duration.h"
#include "pg.h"
#include "reconciliation.h"
#include "topic_reader.h"

namespace {

std::string cell(const shop::PgResult& result, int row, int column) { return PQgetvalue(result.get(), row, column); }

void list_ids(const char* what, const std::vector<std::string>& ids, std::size_t max_listed) {
  for (std::size_t i = 0; i < ids.size() && i < max_listed; ++i) std::printf("%s: %s\n", what, ids[i].c_str());
  if (ids.size() > max_listed) std::printf("%s: ... and %zu more\n", what, ids.size() - max_listed);
}

// 0: every local_message row is in the topic; 1: some are not; 2: an error.
int check_cutover(const std::string& orders_dsn, const std::string& brokers, const std::string& topic,
                  std::size_t max_listed) {
  std::vector<shop::MessageFact> rows;
  std::map<std::string, shop::Copies> copies;
  try {
    shop::PgConnection shop_db(orders_dsn);
    const auto message_rows = shop_db.exec("SELECT id::text, status FROM local_message ORDER BY created_at, id");
    for (int i = 0; i < PQntuples(message_rows.get()); ++i) {
      rows.push_back({cell(message_rows, i, 0), cell(message_rows, i, 1)});
    }
    copies = shop::read_copies(brokers, topic, std::chrono::minutes(1));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reconcile: %s\n", e.what());
    return 2;
  }
  const auto report = shop::reconcile_cutover(rows, copies);
  list_ids("lost (in no record of the topic)", report.lost, max_listed);
  list_ids("twice: published by the poller, never marked SENT (its batch in flight when it stopped)",
           report.unmarked_batch, max_listed);
  list_ids("twice: marked SENT after pgoutbox's snapshot (the poller ran on beside pgoutbox)",
           report.sent_after_snapshot, max_listed);
  list_ids("more than once by one relay (a batch rolled back after its acks)", report.one_relay_twice, max_listed);
  if (report.unknown_ids > 0) {
    std::printf("%lld ids in %s are no local_message row (other producers, or records without an id)\n",
                static_cast<long long>(report.unknown_ids), topic.c_str());
  }
  std::printf("%s\n", shop::cutover_summary_line(report).c_str());
  return report.clean() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Lists orders whose stock event never took effect, or took effect twice; with --cutover, local_message "
      "rows missing from the topic or in it more than once"};
  app.name("reconcile");
  std::string orders_dsn, stock_dsn, grace_text = "0s";
  std::string brokers, topic = "outbox.event.order";
  std::size_t max_listed = 20;
  bool cutover = false;
  app.add_option("--orders-dsn", orders_dsn, "the order service's database")->required();
  app.add_option("--stock-dsn", stock_dsn, "the stock service's database (optional with --cutover)");
  app.add_option("--grace", grace_text, "ignore orders younger than this (events in flight)")->capture_default_str();
  app.add_option("--max-listed", max_listed, "list at most this many orders per problem")->capture_default_str();
  auto* cutover_flag =
      app.add_flag("--cutover", cutover, "check every local_message row against the topic (after a poller cutover)");
  app.add_option("--brokers", brokers, "Kafka bootstrap servers (with --cutover)")->needs(cutover_flag);
  app.add_option("--topic", topic, "the topic the relays publish to (with --cutover)")
      ->capture_default_str()
      ->needs(cutover_flag);
  CLI11_PARSE(app, argc, argv);
  if (cutover ? brokers.empty() : stock_dsn.empty()) {
    std::fprintf(stderr, "reconcile: %s is required\n", cutover ? "--brokers" : "--stock-dsn");
    return 2;
  }
  const auto grace = shop::parse_duration(grace_text);
  if (!grace) {
    std::fprintf(stderr, "reconcile: --grace wants a duration such as 30s or 5m\n");
    return 2;
  }
  const int cutover_verdict = cutover ? check_cutover(orders_dsn, brokers, topic, max_listed) : 0;
  if (stock_dsn.empty()) return cutover_verdict;

  std::vector<shop::OrderFact> orders;
  std::map<std::int64_t, shop::MovementCount> movements;
  std::vector<shop::StockFact> stock;
  try {
    shop::PgConnection shop_db(orders_dsn);
    const auto order_rows = shop_db.exec(
        "SELECT id, sku, quantity FROM orders WHERE created_at <= now() - $1::bigint * interval '1 millisecond' "
        "ORDER BY id",
        {std::to_string(grace->count())});
    for (int i = 0; i < PQntuples(order_rows.get()); ++i) {
      orders.push_back({std::stoll(cell(order_rows, i, 0)), cell(order_rows, i, 1), std::stoi(cell(order_rows, i, 2))});
    }
    shop::PgConnection stock_db(stock_dsn);
    const auto movement_rows = stock_db.exec(
        "SELECT order_id, count(*) FILTER (WHERE outcome = 'applied'), count(*) FILTER (WHERE outcome = 'rejected') "
        "FROM stock_movements GROUP BY order_id");
    for (int i = 0; i < PQntuples(movement_rows.get()); ++i) {
      movements[std::stoll(cell(movement_rows, i, 0))] = {std::stoi(cell(movement_rows, i, 1)),
                                                          std::stoi(cell(movement_rows, i, 2))};
    }
    const auto stock_rows = stock_db.exec(
        "SELECT s.sku, s.initial, s.available, "
        "       coalesce((SELECT sum(m.quantity) FROM stock_movements m WHERE m.sku = s.sku AND m.outcome = "
        "'applied'), 0) "
        "FROM stock s ORDER BY s.sku");
    for (int i = 0; i < PQntuples(stock_rows.get()); ++i) {
      stock.push_back({cell(stock_rows, i, 0), std::stoll(cell(stock_rows, i, 1)), std::stoll(cell(stock_rows, i, 2)),
                       std::stoll(cell(stock_rows, i, 3))});
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reconcile: %s\n", e.what());
    return 2;
  }

  const auto report = shop::reconcile(orders, movements, stock);
  const auto list = [&](const char* what, const std::vector<shop::OrderFact>& problems) {
    for (std::size_t i = 0; i < problems.size() && i < max_listed; ++i) {
      std::printf("%s: order %lld (%s x %d)\n", what, static_cast<long long>(problems[i].id), problems[i].sku.c_str(),
                  problems[i].quantity);
    }
    if (problems.size() > max_listed) std::printf("%s: ... and %zu more\n", what, problems.size() - max_listed);
  };
  list("lost (never took effect)", report.lost);
  list("applied twice", report.applied_twice);
  for (const auto& mismatch : report.stock_mismatches) std::printf("stock mismatch: %s\n", mismatch.c_str());
  std::printf("%s\n", shop::summary_line(report).c_str());
  return std::max(cutover_verdict, report.clean() ? 0 : 1);
}
