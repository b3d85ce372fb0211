#include "order_writer.h"

#include <fmt/format.h>

namespace shop {

OrderWriter::OrderWriter(PgConnection& db, int sku_count, int max_quantity, EventTable table)
    : db_(db), table_(table), random_(std::random_device{}()), sku_(1, sku_count), quantity_(1, max_quantity) {}

Order OrderWriter::place_random_order() {
  Order order{.id = 0, .sku = fmt::format("SKU-{}", sku_(random_)), .quantity = quantity_(random_)};
  Transaction tx(db_);
  const auto inserted = db_.exec("INSERT INTO orders (sku, quantity) VALUES ($1, $2) RETURNING id",
                                 {order.sku, std::to_string(order.quantity)});
  order.id = std::stoll(PQgetvalue(inserted.get(), 0, 0));
  // Debezium's outbox shape: aggregatetype routes to topic outbox.event.order, aggregateid is
  // the Kafka key. Keying by SKU keeps every change to one SKU's stock in one partition, in
  // commit order, so stock consumers never race each other on a row.
  const char* const table = table_ == EventTable::outbox ? "outbox" : "local_message";
  db_.exec(fmt::format(
               "INSERT INTO {} (aggregatetype, aggregateid, type, payload) "
               "VALUES ('order', $2::text, 'OrderCreated', jsonb_build_object('order_id', $1::bigint, 'sku', $2::text, "
               "'quantity', $3::int))",
               table),
           {std::to_string(order.id), order.sku, std::to_string(order.quantity)});
  tx.commit();
  return order;
}

}  // namespace shop
