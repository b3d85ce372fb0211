#include "stock_event.h"

#include <simdjson.h>

#include <limits>

namespace shop {

namespace {

// Fits consumer_log.msg_id and stock.sku, varchar(64).
constexpr std::size_t max_text = 64;

ParsedEvent malformed(std::string why) { return {std::nullopt, std::move(why)}; }

}  // namespace

ParsedEvent parse_stock_event(std::string_view payload, std::optional<std::string_view> id_header) {
  if (!id_header || id_header->empty() || id_header->size() > max_text) {
    return malformed("no usable \"id\" header (the event id, 1 to 64 bytes)");
  }
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(payload);
  simdjson::dom::object object;
  if (const auto error = parser.parse(padded).get(object)) {
    return malformed(std::string("payload is not a JSON object: ") + simdjson::error_message(error));
  }
  StockEvent event;
  event.msg_id = std::string(*id_header);
  std::string_view sku;
  if (object["order_id"].get(event.order_id) || event.order_id <= 0) {
    return malformed("\"order_id\" is missing or not a positive integer");
  }
  if (object["sku"].get(sku) || sku.empty() || sku.size() > max_text) {
    return malformed("\"sku\" is missing or not a string of 1 to 64 bytes");
  }
  if (object["quantity"].get(event.quantity) || event.quantity <= 0 ||
      event.quantity > std::numeric_limits<std::int32_t>::max()) {
    return malformed("\"quantity\" is missing or not a positive 32-bit integer");
  }
  event.sku = std::string(sku);
  return {std::move(event), {}};
}

}  // namespace shop
