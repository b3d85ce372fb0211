// scripts/simulate.sh: runs the simulator (docs/simulation.md) over many seeds, or replays one.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <optional>

#include "simulation.h"

using namespace pgoutbox;

int main(int argc, char** argv) {
  CLI::App app{"pgoutbox's deterministic simulator of the relay core"};
  std::string mode = "both";
  std::uint64_t schedules = 20'000;
  std::uint64_t seed = 1;
  std::optional<std::uint64_t> faults;
  std::optional<int> transactions;
  app.add_option("--mode", mode, "at-least-once, exactly-once or both")
      ->check(CLI::IsMember({"at-least-once", "exactly-once", "both"}));
  app.add_option("--schedules", schedules, "schedules per mode");
  app.add_option("--seed", seed, "the first seed");
  app.add_option("--faults", faults, "replay one schedule: the bit mask of the seed's faults to keep");
  app.add_option("--transactions", transactions, "replay one schedule: its number of transactions");
  CLI11_PARSE(app, argc, argv);

  std::vector<config::Delivery> modes;
  if (mode != "exactly-once") modes.push_back(config::Delivery::at_least_once);
  if (mode != "at-least-once") modes.push_back(config::Delivery::exactly_once);
  int failed = 0;
  for (const auto delivery : modes) {
    const char* name = delivery == config::Delivery::exactly_once ? "exactly-once" : "at-least-once";
    if (faults || transactions) {
      auto schedule = sim::Schedule::from_seed(seed, delivery);
      if (faults) schedule = schedule.with_faults(*faults);
      if (transactions) schedule.transactions = *transactions;
      const auto verdict = sim::simulate(schedule);
      fmt::print("{}\n{}: {}\n", schedule.describe(), name, verdict.ok ? "ok" : "FAILED: " + verdict.failure);
      failed += verdict.ok ? 0 : 1;
      continue;
    }
    // In chunks, so that a long run says how far it got.
    constexpr std::uint64_t kChunk = 50'000;
    const auto started = std::chrono::steady_clock::now();
    sim::Campaign total;
    for (std::uint64_t first = seed; first < seed + schedules && !total.failed; first += kChunk) {
      const auto part = sim::run_campaign(delivery, first, std::min(kChunk, seed + schedules - first));
      total.add(part);
      const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      fmt::print("{}: seeds {}..{}: {} ({:.1f} s of real time)\n", name, seed, seed + total.schedules - 1,
                 sim::report(total), seconds);
      std::fflush(stdout);
    }
    failed += total.failed ? 1 : 0;
  }
  return failed == 0 ? 0 : 1;
}
