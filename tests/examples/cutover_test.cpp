#include "cutover.h"

#include <gtest/gtest.h>

namespace shop {
namespace {

TEST(CutoverReconciliation, EachRowOnceByOneRelayIsCleanWithoutDuplicates) {
  const std::vector<MessageFact> rows{{"a", "SENT"}, {"b", "NEW"}, {"c", "NEW"}};
  const std::map<std::string, Copies> topic{{"a", {1, 0, 0}}, {"b", {0, 0, 1}}, {"c", {0, 1, 0}}};
  const auto report = reconcile_cutover(rows, topic);
  EXPECT_TRUE(report.clean());
  EXPECT_EQ(report.duplicates(), 0);
  EXPECT_EQ(report.sent, 1);
  EXPECT_EQ(cutover_summary_line(report),
            "cutover: 3 rows, 0 lost, 0 duplicates (0 unmarked batch, 0 sent after the snapshot, 0 one relay twice); "
            "published by the poller 1, pgoutbox's backfill 1, its stream 1");
}

TEST(CutoverReconciliation, ARowInNoRecordIsLost) {
  const auto report = reconcile_cutover({{"a", "SENT"}, {"b", "NEW"}}, {{"a", {1, 0, 0}}});
  EXPECT_FALSE(report.clean());
  ASSERT_EQ(report.lost.size(), 1U);
  EXPECT_EQ(report.lost[0], "b");
}

TEST(CutoverReconciliation, DuplicatesAreSortedByWhy) {
  const std::vector<MessageFact> rows{{"unmarked", "NEW"}, {"late", "SENT"}, {"again", "SENT"}, {"both", "NEW"}};
  const std::map<std::string, Copies> topic{
      {"unmarked", {1, 0, 1}}, {"late", {1, 1, 0}}, {"again", {2, 0, 0}}, {"both", {1, 1, 1}}, {"stranger", {0, 1, 0}}};
  const auto report = reconcile_cutover(rows, topic);
  EXPECT_TRUE(report.clean());
  EXPECT_EQ(report.unmarked_batch, std::vector<std::string>{"unmarked"});
  EXPECT_EQ(report.sent_after_snapshot, std::vector<std::string>{"late"});
  // pgoutbox twice (backfill and stream) is never explained by the poller: listed apart.
  EXPECT_EQ(report.one_relay_twice, (std::vector<std::string>{"again", "both"}));
  EXPECT_EQ(report.duplicates(), 4);
  EXPECT_EQ(report.unknown_ids, 1);
  EXPECT_EQ(report.by_poller, 4);
}

}  // namespace
}  // namespace shop
