#include "retry_schedule.h"

#include <gtest/gtest.h>

namespace shop {
namespace {

using namespace std::chrono_literals;

TEST(RetrySchedule, ProductionIsTheSeedsSchedule) {
  const auto schedule = RetrySchedule::production();
  EXPECT_EQ(schedule.delay_before_retry(0), 5s);
  EXPECT_EQ(schedule.delay_before_retry(1), 30s);
  EXPECT_EQ(schedule.delay_before_retry(2), 2min);
  EXPECT_EQ(schedule.delay_before_retry(3), 10min);
  EXPECT_EQ(schedule.delay_before_retry(4), std::nullopt) << "after the last wait the record is given up";
  EXPECT_EQ(schedule.total(), 12min + 35s);
}

TEST(RetrySchedule, AnEmptyScheduleNeverRetries) {
  const RetrySchedule schedule({});
  EXPECT_EQ(schedule.delay_before_retry(0), std::nullopt);
  EXPECT_EQ(schedule.total(), 0ms);
}

}  // namespace
}  // namespace shop
