#include "stock_event.h"

#include <gtest/gtest.h>

namespace shop {
namespace {

TEST(StockEvent, ParsesTheOrderServicesPayload) {
  const auto parsed = parse_stock_event(R"({"order_id": 42, "sku": "SKU-7", "quantity": 3})", "3f1c-uuid");
  ASSERT_TRUE(parsed.event) << parsed.error;
  EXPECT_EQ(parsed.event->msg_id, "3f1c-uuid");
  EXPECT_EQ(parsed.event->order_id, 42);
  EXPECT_EQ(parsed.event->sku, "SKU-7");
  EXPECT_EQ(parsed.event->quantity, 3);
}

TEST(StockEvent, ExtraFieldsAndAnyOrderAreFine) {
  const auto parsed = parse_stock_event(R"({"quantity": 1, "note": [1, 2], "sku": "A", "order_id": 1})", "id");
  ASSERT_TRUE(parsed.event) << parsed.error;
  EXPECT_EQ(parsed.event->sku, "A");
}

TEST(StockEvent, MalformedRecordsSayWhy) {
  struct Case {
    const char* payload;
    std::optional<std::string_view> id;
    const char* why;
  };
  const Case cases[] = {
      {"{not json", "id", "not a JSON object"},
      {"[1, 2]", "id", "not a JSON object"},
      {"", "id", "not a JSON object"},
      {R"({"sku": "A", "quantity": 1})", "id", "order_id"},
      {R"({"order_id": "42", "sku": "A", "quantity": 1})", "id", "order_id"},
      {R"({"order_id": -1, "sku": "A", "quantity": 1})", "id", "order_id"},
      {R"({"order_id": 1, "sku": 5, "quantity": 1})", "id", "sku"},
      {R"({"order_id": 1, "sku": "", "quantity": 1})", "id", "sku"},
      {R"({"order_id": 1, "sku": "A", "quantity": 0})", "id", "quantity"},
      {R"({"order_id": 1, "sku": "A", "quantity": 1.5})", "id", "quantity"},
      {R"({"order_id": 1, "sku": "A", "quantity": 99999999999})", "id", "quantity"},
      {R"({"order_id": 1, "sku": "A", "quantity": 1})", std::nullopt, "id"},
      {R"({"order_id": 1, "sku": "A", "quantity": 1})", "", "id"},
  };
  for (const auto& c : cases) {
    const auto parsed = parse_stock_event(c.payload, c.id);
    EXPECT_FALSE(parsed.event) << c.payload;
    EXPECT_NE(parsed.error.find(c.why), std::string::npos) << c.payload << " -> " << parsed.error;
  }
}

}  // namespace
}  // namespace shop
