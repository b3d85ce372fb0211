#include "reconciliation.h"

#include <fmt/format.h>

namespace shop {

Report reconcile(const std::vector<OrderFact>& orders, const std::map<std::int64_t, MovementCount>& movements,
                 const std::vector<StockFact>& stock) {
  Report report;
  for (const auto& order : orders) {
    ++report.orders;
    const auto found = movements.find(order.id);
    const int effects = found == movements.end() ? 0 : found->second.applied + found->second.rejected;
    if (effects == 0) {
      report.lost.push_back(order);
    } else if (effects > 1) {
      report.applied_twice.push_back(order);
    } else {
      ++report.took_effect;
      if (found->second.rejected == 1) ++report.rejected;
    }
  }
  for (const auto& s : stock) {
    if (s.initial - s.applied_quantity != s.available) {
      report.stock_mismatches.push_back(fmt::format("{}: started at {}, {} applied, but {} available", s.sku, s.initial,
                                                    s.applied_quantity, s.available));
    }
  }
  return report;
}

std::string summary_line(const Report& report) {
  const std::string rejected =
      report.rejected > 0 ? fmt::format(" ({} of them rejected: insufficient stock or unknown sku)", report.rejected)
                          : "";
  return fmt::format("{} orders, {} applied{}, {} lost, {} applied twice", report.orders, report.took_effect, rejected,
                     report.lost.size(), report.applied_twice.size());
}

}  // namespace shop
