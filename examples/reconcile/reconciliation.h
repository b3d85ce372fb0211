#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shop {

// Facts from the two services' databases, as reconciliation reads them.
struct OrderFact {
  std::int64_t id = 0;
  std::string sku;
  int quantity = 0;
};
struct MovementCount {
  int applied = 0;   // stock_movements rows with outcome 'applied'
  int rejected = 0;  // ... and 'rejected'
};
struct StockFact {
  std::string sku;
  std::int64_t initial = 0;
  std::int64_t available = 0;
  std::int64_t applied_quantity = 0;  // sum of the applied movements' quantities
};

struct Report {
  std::int64_t orders = 0;
  std::int64_t took_effect = 0;  // applied or rejected, exactly once
  std::int64_t rejected = 0;
  std::vector<OrderFact> lost;                // no movement: the event never took effect
  std::vector<OrderFact> applied_twice;       // more than one movement for one order
  std::vector<std::string> stock_mismatches;  // initial - applied != available
  bool clean() const { return lost.empty() && applied_twice.empty() && stock_mismatches.empty(); }
};

// The seeds' last safety net (对账兜底): every order must have taken effect in the stock
// service exactly once, and every SKU's stock must equal its start minus what was applied.
Report reconcile(const std::vector<OrderFact>& orders, const std::map<std::int64_t, MovementCount>& movements,
                 const std::vector<StockFact>& stock);

// "N orders, N applied, 0 lost, 0 applied twice", with a rejected count when there are any.
std::string summary_line(const Report& report);

}  // namespace shop
