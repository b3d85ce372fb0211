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
class OrderWriter {
 public:
  OrderWriter(PgConnection& db, int sku_count, int max_quantity);
  // Returns the committed order; throws PgError (nothing committed, or, when the connection
  // broke during COMMIT, unknown: the database is the truth, and reconciliation reads it).
  Order place_random_order();

 private:
  PgConnection& db_;
  std::mt19937_64 random_;
  std::uniform_int_distribution<int> sku_;
  std::uniform_int_distribution<int> quantity_;
};

}  // namespace shop
