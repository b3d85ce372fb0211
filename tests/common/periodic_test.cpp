// Periodic (pgoutbox/periodic.h): trigger() runs the task between two intervals, and several
// triggers before it runs count once.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "pgoutbox/periodic.h"

namespace pgoutbox {
namespace {

using namespace std::chrono_literals;

bool wait_for(const std::atomic<int>& runs, int at_least, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (runs.load() < at_least) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

TEST(PeriodicTest, TriggerRunsTheTaskBeforeTheInterval) {
  std::atomic<int> runs{0};
  Periodic periodic(
      1h, [&runs] { ++runs; }, false);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(runs.load(), 0);
  periodic.trigger();
  EXPECT_TRUE(wait_for(runs, 1, 5s));
  periodic.trigger();
  EXPECT_TRUE(wait_for(runs, 2, 5s));
}

TEST(PeriodicTest, TriggersWhileTheTaskRunsCountOnce) {
  std::atomic<int> runs{0};
  std::atomic<bool> release{false};
  Periodic periodic(1h, [&] {
    ++runs;
    while (!release.load()) std::this_thread::sleep_for(1ms);
  });
  ASSERT_TRUE(wait_for(runs, 1, 5s));  // the run at start, held
  for (int i = 0; i < 5; ++i) periodic.trigger();
  release = true;
  ASSERT_TRUE(wait_for(runs, 2, 5s));
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(runs.load(), 2);
}

}  // namespace
}  // namespace pgoutbox
