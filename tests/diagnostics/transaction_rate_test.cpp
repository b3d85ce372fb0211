// The findings `check` makes of a measured rate: the largest Kafka transaction the in-flight caps
// allow against transaction.timeout.ms (a warning above half of it, with the fix that fits the
// broker's maximum), and the largest Postgres transaction the timeout publishes.
#include "pgoutbox/diagnostics/transaction_rate.h"

#include <gtest/gtest.h>

namespace pgoutbox::diagnostics {
namespace {

using namespace std::chrono_literals;

// `records` records of `size` bytes acknowledged in `elapsed`.
RateMeasurement measured(std::uint64_t records, std::uint64_t size, std::chrono::microseconds elapsed) {
  RateMeasurement m;
  m.rate = TransactionRate{.records = records, .bytes = records * size, .elapsed = elapsed, .sent = records};
  return m;
}

config::Config exactly_once(const std::string& transaction_timeout_ms = "") {
  config::Config c;
  c.delivery = config::Delivery::exactly_once;
  c.checkpoint.topic = "ckpt";
  if (!transaction_timeout_ms.empty()) c.kafka.properties["transaction.timeout.ms"] = transaction_timeout_ms;
  return c;
}

TEST(TransactionRateFindings, TheLargestTransactionWithinHalfTheTimeoutIsOk) {
  // 10,000 records/s: the default caps' 20,000 records take 2 s of the default 60 s.
  const auto findings = transaction_rate_findings(exactly_once(), "id", measured(5000, 838, 500ms), 900'000ms);
  ASSERT_EQ(findings.size(), 2U);
  EXPECT_EQ(findings[0].severity, Severity::ok) << findings[0].message;
  EXPECT_NE(findings[0].message.find("10000 records/s"), std::string::npos) << findings[0].message;
  EXPECT_NE(findings[0].message.find("about 20000 records here) takes about 2000 ms, within half of "
                                     "transaction.timeout.ms (60000 ms)"),
            std::string::npos)
      << findings[0].message;
  EXPECT_EQ(findings[1].severity, Severity::ok);
  EXPECT_NE(findings[1].message.find("up to about 600000 records or 502800000 bytes is published within "
                                     "transaction.timeout.ms (60000 ms)"),
            std::string::npos)
      << findings[1].message;
}

TEST(TransactionRateFindings, TheCapHitFirstEndsTheTransaction) {
  auto config = exactly_once();
  config.limits.max_in_flight_records = 1'000'000;  // 16 MiB of 838-byte records is 20,020
  const auto findings = transaction_rate_findings(config, "id", measured(5000, 838, 500ms), 900'000ms);
  EXPECT_NE(findings[0].message.find("about 20020 records here) takes about 2003 ms"), std::string::npos)
      << findings[0].message;
}

TEST(TransactionRateFindings, MoreThanHalfTheTimeoutWarnsWithTheTimeoutItNeeds) {
  const auto findings = transaction_rate_findings(exactly_once("3000"), "id", measured(5000, 838, 500ms), 900'000ms);
  ASSERT_EQ(findings.size(), 2U);
  EXPECT_EQ(findings[0].severity, Severity::warning);
  EXPECT_NE(findings[0].message.find("takes about 2000 ms, more than half of transaction.timeout.ms (3000 ms)"),
            std::string::npos)
      << findings[0].message;
  EXPECT_EQ(findings[0].fix,
            "raise kafka.properties.transaction.timeout.ms to 4000 or more (the broker allows up to 900000 ms, its "
            "transaction.max.timeout.ms), or lower limits.max_in_flight_records to 15000 or "
            "limits.max_in_flight_bytes to 12570000.");
  EXPECT_NE(findings[1].message.find("up to about 30000 records"), std::string::npos) << findings[1].message;
}

TEST(TransactionRateFindings, LongerThanTheTimeoutSaysTheCoordinatorAbortsIt) {
  const auto findings = transaction_rate_findings(exactly_once("1000"), "id", measured(5000, 838, 500ms), {});
  EXPECT_NE(findings[0].message.find("more than transaction.timeout.ms (1000 ms): the coordinator aborts"),
            std::string::npos)
      << findings[0].message;
  EXPECT_NE(findings[0].fix.find("(at most the brokers' transaction.max.timeout.ms)"), std::string::npos)
      << findings[0].fix;
}

TEST(TransactionRateFindings, BeyondTheBrokersMaximumTheCapsMustComeDown) {
  // 100 records/s: 20,000 records take 200 s, twice that is above the broker's 300 s.
  const auto findings = transaction_rate_findings(exactly_once("60000"), "id", measured(100, 838, 1s), 300'000ms);
  EXPECT_EQ(findings[0].severity, Severity::warning);
  EXPECT_EQ(findings[0].fix.rfind("lower limits.max_in_flight_records to 3000 or limits.max_in_flight_bytes to "
                                  "2514000 (what half of transaction.timeout.ms publishes at this rate), or raise "
                                  "kafka.properties.transaction.timeout.ms up to the broker's "
                                  "transaction.max.timeout.ms (300000 ms)",
                                  0),
            0U)
      << findings[0].fix;
}

TEST(TransactionRateFindings, ARateNotMeasuredIsAWarningNamingTheProbesGrants) {
  RateMeasurement refused;
  refused.failure =
      "initialising transactions of transactional id id-check failed: TRANSACTIONAL_ID_AUTHORIZATION_FAILED";
  const auto findings = transaction_rate_findings(exactly_once(), "id", refused, 900'000ms);
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].severity, Severity::warning);
  EXPECT_NE(findings[0].message.find("could not be measured"), std::string::npos);
  EXPECT_NE(findings[0].message.find("TRANSACTIONAL_ID_AUTHORIZATION_FAILED"), std::string::npos);
  EXPECT_NE(findings[0].fix.find("transactional id id-check (a prefixed ACL on id covers it and the -alt one) and "
                                 "WRITE on topic ckpt"),
            std::string::npos)
      << findings[0].fix;
}

}  // namespace
}  // namespace pgoutbox::diagnostics
