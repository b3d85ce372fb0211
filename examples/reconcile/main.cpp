// reconcile: compares the order service's orders with the stock service's movements and lists
// every order whose event never took effect and every one that took effect twice; also checks
// each SKU's stock against its movements. Exit 0 when all agree, 1 when not, 2 on an error.
//
//   reconcile --orders-dsn "host=... dbname=shop" --stock-dsn "host=... dbname=stock" [--grace 5m]
//
// --grace leaves out orders younger than that: their events may still be on their way.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "duration.h"
#include "pg.h"
#include "reconciliation.h"

namespace {

std::string cell(const shop::PgResult& result, int row, int column) { return PQgetvalue(result.get(), row, column); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Lists orders whose stock event never took effect, or took effect twice"};
  app.name("reconcile");
  std::string orders_dsn, stock_dsn, grace_text = "0s";
  std::size_t max_listed = 20;
  app.add_option("--orders-dsn", orders_dsn, "the order service's database")->required();
  app.add_option("--stock-dsn", stock_dsn, "the stock service's database")->required();
  app.add_option("--grace", grace_text, "ignore orders younger than this (events in flight)")->capture_default_str();
  app.add_option("--max-listed", max_listed, "list at most this many orders per problem")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const auto grace = shop::parse_duration(grace_text);
  if (!grace) {
    std::fprintf(stderr, "reconcile: --grace wants a duration such as 30s or 5m\n");
    return 2;
  }

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
  return report.clean() ? 0 : 1;
}
