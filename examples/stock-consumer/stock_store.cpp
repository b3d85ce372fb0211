#include "stock_store.h"

namespace shop {

bool StockStore::claim(const StockEvent& event) {
  // The unique key decides, not a SELECT before the INSERT: two deliveries racing each other
  // (a rebalance) both reach this line, and the second waits for the first and gets 0 rows.
  const auto claimed = db_.exec("INSERT INTO consumer_log (consumer, msg_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                                {consumer_, event.msg_id});
  return PgConnection::affected_rows(claimed) == 1;
}

ApplyOutcome StockStore::apply(const StockEvent& event) {
  Transaction tx(db_);
  if (!claim(event)) return ApplyOutcome::duplicate;
  const auto quantity = std::to_string(event.quantity);
  const auto reserved =
      db_.exec("UPDATE stock SET available = available - $2 WHERE sku = $1 AND available >= $2", {event.sku, quantity});
  if (PgConnection::affected_rows(reserved) == 0) {
    const auto known = db_.exec("SELECT 1 FROM stock WHERE sku = $1", {event.sku});
    // Rolled back, claim included: the rejection is recorded once its compensating event is out.
    return PQntuples(known.get()) == 0 ? ApplyOutcome::unknown_sku : ApplyOutcome::insufficient_stock;
  }
  db_.exec("INSERT INTO stock_movements (msg_id, order_id, sku, quantity, outcome) VALUES ($1, $2, $3, $4, 'applied')",
           {event.msg_id, std::to_string(event.order_id), event.sku, quantity});
  tx.commit();
  return ApplyOutcome::applied;
}

bool StockStore::record_rejection(const StockEvent& event, std::string_view reason) {
  Transaction tx(db_);
  if (!claim(event)) return false;
  db_.exec(
      "INSERT INTO stock_movements (msg_id, order_id, sku, quantity, outcome, reason) "
      "VALUES ($1, $2, $3, $4, 'rejected', $5)",
      {event.msg_id, std::to_string(event.order_id), event.sku, std::to_string(event.quantity), std::string(reason)});
  tx.commit();
  return true;
}

}  // namespace shop
