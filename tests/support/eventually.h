#pragma once

#include <chrono>
#include <thread>

namespace pgoutbox::test {

// Polls `condition` until it holds or `timeout` passes. Tests wait with this, never with a bare
// sleep: the wait ends as soon as the fact is true, and a deadline turns a hang into a failure.
template <class Condition>
bool eventually(Condition&& condition, std::chrono::milliseconds timeout,
                std::chrono::milliseconds interval = std::chrono::milliseconds(50)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(interval);
  }
}

}  // namespace pgoutbox::test

#define PGOUTBOX_ASSERT_EVENTUALLY(cond, timeout)                                                           \
  ASSERT_TRUE(::pgoutbox::test::eventually([&] { return static_cast<bool>(cond); }, (timeout))) << "never " \
                                                                                                   "true: " #cond
#define PGOUTBOX_EXPECT_EVENTUALLY(cond, timeout)                                                           \
  EXPECT_TRUE(::pgoutbox::test::eventually([&] { return static_cast<bool>(cond); }, (timeout))) << "never " \
                                                                                                   "true: " #cond
