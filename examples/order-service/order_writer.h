#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "pg.h"

namespace shop {

struct Order {
  std::int64_t id = 0;
  std::string sku;
  int quantity = 0;
};

// Writes an order and its outbox event in ONE local transaction: both rows commit or neither
// does, so no order exists without its event and no event without its order. pgoutbox relays
// the outbox row; nothing here talks to Kafka.
//
// The event table is `outbox` (sql/outbox.sql) or, for a system still relayed by a poller,
// `local_message` (examples/sql/local_message.sql: the same event columns, plus status NEW).
class OrderWriter {
 public:
  enum class EventTable { outbox, local_message };
  OrderWriter(PgConnection& db, int sku_count, int max_quantity, EventTable table = EventTable::outbox);
  // Returns the committed order; throws PgError (nothing committed, or, when the connection
  // broke during COMMIT, unknown: the database is the truth, and reconciliation reads it).
  Order place_random_order();

 private:
  PgConnection& db_;
  EventTable table_;
  std::mt19937_64 random_;
  std::uniform_int_distribution<int> sku_;
  std::uniform_int_distribution<int> quantity_;
};

}  // namespace shop
