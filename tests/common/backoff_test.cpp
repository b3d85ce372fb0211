#include "pgoutbox/backoff.h"

#include <gtest/gtest.h>

namespace pgoutbox {
namespace {

using std::chrono::milliseconds;

TEST(Backoff, GrowsByTheFactorWithinJitterAndCapsAtMax) {
  Backoff b(milliseconds(100), milliseconds(1000), 2.0, 42);
  const int expected_caps[] = {100, 200, 400, 800, 1000, 1000, 1000};
  for (const int cap : expected_caps) {
    const auto d = b.next().count();
    EXPECT_GE(d, cap / 2) << "cap " << cap;
    EXPECT_LE(d, cap) << "cap " << cap;
  }
}

TEST(Backoff, ResetStartsOverAndJitterSpreadsInstances) {
  Backoff a(milliseconds(1000), milliseconds(60000), 3.0, 1);
  Backoff b(milliseconds(1000), milliseconds(60000), 3.0, 2);
  a.next();
  a.next();
  a.reset();
  EXPECT_LE(a.next().count(), 1000);
  int differ = 0;
  for (int i = 0; i < 5; ++i) differ += a.next() != b.next() ? 1 : 0;
  EXPECT_GT(differ, 0);
}

TEST(Backoff, DegenerateSettingsStaySane) {
  Backoff flat(milliseconds(50), milliseconds(10), 0.5, 3);  // max < min, factor < 1
  for (int i = 0; i < 10; ++i) {
    const auto d = flat.next().count();
    EXPECT_GE(d, 25);
    EXPECT_LE(d, 50);
  }
  Backoff huge(milliseconds(1), milliseconds(3'600'000), 10.0, 4);
  for (int i = 0; i < 100; ++i) EXPECT_LE(huge.next().count(), 3'600'000);  // no overflow
}

}  // namespace
}  // namespace pgoutbox
