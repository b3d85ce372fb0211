#include "duration.h"

#include <gtest/gtest.h>

namespace shop {
namespace {

using namespace std::chrono_literals;

TEST(Duration, ParsesUnits) {
  EXPECT_EQ(parse_duration("250ms"), 250ms);
  EXPECT_EQ(parse_duration("5s"), 5s);
  EXPECT_EQ(parse_duration("2m"), 2min);
  EXPECT_EQ(parse_duration("1h"), 1h);
  EXPECT_EQ(parse_duration("0s"), 0ms);
}

TEST(Duration, RefusesWhatIsNotADuration) {
  for (const char* bad : {"", "5", "s", "5x", "-1s", "1.5s", " 5s", "5 s"}) {
    EXPECT_EQ(parse_duration(bad), std::nullopt) << bad;
  }
}

TEST(Duration, ParsesAList) {
  const auto list = parse_duration_list("5s,30s,2m,10m");
  ASSERT_TRUE(list);
  EXPECT_EQ(*list, (std::vector<std::chrono::milliseconds>{5s, 30s, 2min, 10min}));
  EXPECT_EQ(parse_duration_list("5s,,1m"), std::nullopt);
  EXPECT_EQ(parse_duration_list("5s,x"), std::nullopt);
}

}  // namespace
}  // namespace shop
