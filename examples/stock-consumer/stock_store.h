#pragma once

#include <string>
#include <string_view>

#include "pg.h"
#include "stock_event.h"

namespace shop {

enum class ApplyOutcome {
  applied,             // stock reserved, consumer_log and stock_movements written, committed
  duplicate,           // consumer_log already held the event id: handled before, nothing done
  insufficient_stock,  // business error: nothing written
  unknown_sku,         // business error: nothing written
};

// The stock service's database side. Each call is one local transaction.
class StockStore {
 public:
  StockStore(PgConnection& db, std::string consumer) : db_(db), consumer_(std::move(consumer)) {}

  // In one transaction: claim the event id in consumer_log (the primary key turns a repeat
  // into 0 rows, which we skip), reserve the stock, record the movement. Throws PgError.
  ApplyOutcome apply(const StockEvent& event);

  // In one transaction: claim the event id and record the rejection. False when the id was
  // claimed already. Throws PgError.
  bool record_rejection(const StockEvent& event, std::string_view reason);

 private:
  bool claim(const StockEvent& event);
  PgConnection& db_;
  std::string consumer_;
};

}  // namespace shop
