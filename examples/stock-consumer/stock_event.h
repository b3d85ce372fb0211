#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace shop {

// What the stock service needs from an OrderCreated event: the payload's order id, SKU and
// quantity, and the event id from the record's "id" header (the idempotency key).
struct StockEvent {
  std::string msg_id;
  std::int64_t order_id = 0;
  std::string sku;
  std::int64_t quantity = 0;
};

// Either an event, or why the record is malformed (poison: it goes to the dead-letter topic,
// retrying cannot make it parse).
struct ParsedEvent {
  std::optional<StockEvent> event;
  std::string error;
};

ParsedEvent parse_stock_event(std::string_view payload, std::optional<std::string_view> id_header);

}  // namespace shop
