#include "reconciliation.h"

#include <gtest/gtest.h>

namespace shop {
namespace {

TEST(Reconciliation, EveryOrderOnceIsClean) {
  const std::vector<OrderFact> orders{{1, "A", 2}, {2, "B", 1}, {3, "A", 1}};
  const std::map<std::int64_t, MovementCount> movements{{1, {1, 0}}, {2, {0, 1}}, {3, {1, 0}}};
  const std::vector<StockFact> stock{{"A", 10, 7, 3}, {"B", 0, 0, 0}};
  const auto report = reconcile(orders, movements, stock);
  EXPECT_TRUE(report.clean());
  EXPECT_EQ(report.orders, 3);
  EXPECT_EQ(report.took_effect, 3);
  EXPECT_EQ(report.rejected, 1);
  EXPECT_EQ(summary_line(report),
            "3 orders, 3 applied (1 of them rejected: insufficient stock or unknown sku), 0 lost, 0 applied twice");
}

TEST(Reconciliation, TheDemosLineWithoutRejections) {
  const auto report = reconcile({{1, "A", 1}}, {{1, {1, 0}}}, {{"A", 5, 4, 1}});
  EXPECT_EQ(summary_line(report), "1 orders, 1 applied, 0 lost, 0 applied twice");
}

TEST(Reconciliation, ListsLostAndDoubleAppliedOrders) {
  const std::vector<OrderFact> orders{{1, "A", 1}, {2, "A", 1}, {3, "A", 1}, {4, "A", 1}};
  // 2: no movement at all; 3: applied twice; 4: applied and rejected (two effects)
  const std::map<std::int64_t, MovementCount> movements{{1, {1, 0}}, {3, {2, 0}}, {4, {1, 1}}, {99, {1, 0}}};
  const auto report = reconcile(orders, movements, {});
  EXPECT_FALSE(report.clean());
  ASSERT_EQ(report.lost.size(), 1U);
  EXPECT_EQ(report.lost[0].id, 2);
  ASSERT_EQ(report.applied_twice.size(), 2U);
  EXPECT_EQ(report.applied_twice[0].id, 3);
  EXPECT_EQ(report.applied_twice[1].id, 4);
  EXPECT_EQ(summary_line(report), "4 orders, 1 applied, 1 lost, 2 applied twice");
}

TEST(Reconciliation, StockThatDoesNotAddUpIsAMismatch) {
  const auto report = reconcile({}, {}, {{"A", 10, 6, 3}});
  EXPECT_FALSE(report.clean());
  ASSERT_EQ(report.stock_mismatches.size(), 1U);
  EXPECT_EQ(report.stock_mismatches[0], "A: started at 10, 3 applied, but 6 available");
}

}  // namespace
}  // namespace shop
