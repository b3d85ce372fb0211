// The simulator in CI (docs/simulation.md): a fixed range of seeds per delivery mode, so a run
// is the same everywhere; scripts/simulate.sh explores new seeds for as long as it is given.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "simulation.h"

namespace pgoutbox::sim {
namespace {

std::uint64_t schedules() {
  if (const char* n = std::getenv("PGOUTBOX_SIM_SCHEDULES")) return std::stoull(n);
#if defined(__SANITIZE_ADDRESS__)
  return 1'000;  // AddressSanitizer makes each schedule about ten times slower
#else
  return 20'000;
#endif
}

TEST(Simulation, AtLeastOnceHoldsOnEverySchedule) {
  const auto campaign = run_campaign(config::Delivery::at_least_once, 1, schedules());
  std::printf("at-least-once: %s\n", report(campaign).c_str());
  EXPECT_FALSE(campaign.failed) << report(campaign);
}

TEST(Simulation, ExactlyOnceHoldsOnEverySchedule) {
  const auto campaign = run_campaign(config::Delivery::exactly_once, 1, schedules());
  std::printf("exactly-once: %s\n", report(campaign).c_str());
  EXPECT_FALSE(campaign.failed) << report(campaign);
}

// A seed is a schedule: run twice, it comes to the same end by the same path.
TEST(Simulation, ASeedReplaysExactly) {
  const auto schedule = Schedule::from_seed(42, config::Delivery::exactly_once);
  const auto a = simulate(schedule);
  const auto b = simulate(schedule);
  EXPECT_EQ(a.ok, b.ok);
  EXPECT_EQ(a.failure, b.failure);
  EXPECT_EQ(a.virtual_time, b.virtual_time);
  EXPECT_EQ(a.sessions, b.sessions);
  EXPECT_EQ(a.duplicates, b.duplicates);
}

}  // namespace
}  // namespace pgoutbox::sim
