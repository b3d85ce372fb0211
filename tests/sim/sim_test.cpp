// The simulator in CI (docs/simulation.md): a fixed range of seeds per delivery mode, so a run
// is the same everywhere; scripts/simulate.sh explores new seeds for as long as it is given.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "sim_kafka.h"
#include "simulation.h"

namespace pgoutbox::sim {
namespace {

std::uint64_t schedules() {
  if (const char* n = std::getenv("PGOUTBOX_SIM_SCHEDULES")) return std::stoull(n);
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer makes each schedule about ten times slower; this pass looks for memory and
  // undefined-behaviour errors on the paths the schedules take, not for rare interleavings.
  return 300;
#else
  // More than any mutation found within CI needs (the rarest, defect 19, at 8,736:
  // docs/simulation.md); scripts/simulate.sh goes further.
  return 10'000;
#endif
}

// The schedules reach the topic limits (docs/spec.md I13): records the relay refuses before
// sending them, and batches Kafka refuses for their size (a limit lowered while the relay runs,
// or not read during an outage).
void expect_limits_met(const Campaign& campaign) {
  if (campaign.schedules < 1'000) return;
  EXPECT_GT(campaign.refused_before_sending, 0U);
  EXPECT_GT(campaign.size_refusals, 0U);
}

TEST(Simulation, AtLeastOnceHoldsOnEverySchedule) {
  const auto campaign = run_campaign(config::Delivery::at_least_once, 1, schedules());
  std::printf("at-least-once: %s\n", report(campaign).c_str());
  EXPECT_FALSE(campaign.failed) << report(campaign);
  expect_limits_met(campaign);
}

TEST(Simulation, ExactlyOnceHoldsOnEverySchedule) {
  const auto campaign = run_campaign(config::Delivery::exactly_once, 1, schedules());
  std::printf("exactly-once: %s\n", report(campaign).c_str());
  EXPECT_FALSE(campaign.failed) << report(campaign);
  expect_limits_met(campaign);
}

// The simulated producer cuts what it is given at one moment into batches of at most batch.size
// bytes, and the broker refuses a batch over its topic's max.message.bytes whole, as a real one
// does (librdkafka does not split it).
TEST(Simulation, KafkaRefusesABatchOverItsTopicsLimitWhole) {
  using namespace std::chrono_literals;
  constexpr std::size_t kLimit = 2'000;
  const auto records_of = [](const std::string& run) {
    std::vector<outbox::Record> records(20);
    for (std::size_t i = 0; i < records.size(); ++i) {
      records[i].topic = "t";
      records[i].key = "k";
      records[i].event_id = run + std::to_string(i);
      records[i].value = std::string(150, 'x');
    }
    return records;
  };
  test::VirtualClock clock;
  Rng rng(1);
  SimKafka kafka(clock, rng, KafkaFaults{});
  kafka.set_limit("t", kLimit);
  ASSERT_LT(SimKafka::kBatchHeader + SimKafka::record_bytes(records_of("")[0]), kafka::batch_size_under(kLimit));

  for (const std::size_t batch_size : {std::size_t{1'000'000}, kafka::batch_size_under(kLimit)}) {
    const std::string run = batch_size > kLimit ? "large-" : "under-";
    std::vector<kafka::Delivery> reports;
    kafka::SinkOptions options;
    options.on_delivery = [&](const kafka::Delivery& d) { reports.push_back(d); };
    auto sink = kafka.factory(batch_size)(std::move(options));
    std::uint64_t cookie = 0;
    for (const auto& record : records_of(run)) {
      kafka::DeliveryError error;
      ASSERT_EQ(sink->produce(record, ++cookie, error), kafka::Sink::Produced::ok);
    }
    ASSERT_TRUE(sink->flush(1s));
    ASSERT_EQ(reports.size(), 20U);
    for (const auto& report : reports) {
      if (batch_size > kLimit) {
        ASSERT_TRUE(report.error) << "one batch of 20 records, over the limit: refused whole";
        EXPECT_EQ(report.error->code, "MSG_SIZE_TOO_LARGE");
        EXPECT_TRUE(report.error->size_refusal);
      } else {
        EXPECT_FALSE(report.error) << "batches under the limit are taken";
      }
    }
  }
  EXPECT_EQ(kafka.visible("t").size(), 20U);
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
