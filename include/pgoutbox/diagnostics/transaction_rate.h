#pragma once

// Exactly-once: whether the largest Kafka transaction pgoutbox may open can be published within
// the producer's transaction.timeout.ms (docs/operating.md "Transaction timeout"). A Kafka
// transaction holds whole Postgres transactions and is committed once the in-flight caps are
// reached, so the largest one holds about limits.max_in_flight_records records or
// limits.max_in_flight_bytes bytes; the coordinator aborts one open longer than the timeout.
//
// `check` measures how fast this cluster takes pgoutbox's records inside a Kafka transaction: a
// transactional producer of its own (the configured transactional id followed by -check, so it
// fences neither the running instance nor its -alt producer), with the configured properties,
// writes a few thousand records into the checkpoint topic in one transaction and aborts it. An
// aborted record is never read back: the checkpoint reader reads read_committed, and a probe
// record is neither under a slot's key nor a checkpoint (kafka/checkpoint.h).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pgoutbox/config/config.h"
#include "pgoutbox/diagnostics/finding.h"

namespace pgoutbox::diagnostics {

// What the probe's transaction came to: records and their key + value bytes acknowledged, from
// its first produce to its last acknowledgement.
struct TransactionRate {
  std::uint64_t records = 0;
  std::uint64_t bytes = 0;
  std::chrono::microseconds elapsed{0};
  std::uint64_t sent = 0;  // records handed to the producer
  bool cut_short = false;  // the time bound came before every acknowledgement
  double records_per_second() const;
  double bytes_per_second() const;
};

// The probe's outcome: a rate, or why none was measured.
struct RateMeasurement {
  std::optional<TransactionRate> rate;
  std::string failure;  // librdkafka's error name and text, or what was missing
  std::string note;     // said with either: the abort of the probe's transaction was not confirmed
};

// The transactional id `run` uses: kafka.transactional_id, or the one derived from the server's
// system identifier, the database and the slot, read over an ordinary connection. nullopt, with
// `why` set, when Postgres cannot say.
std::optional<std::string> configured_transactional_id(const config::Config& config, std::string& why);

// Writes the probe's records into config.checkpoint.topic (which must exist: a producer may have
// the broker create it, uncompacted) within one transaction of `transactional_id` and aborts it.
// `timeout` bounds each request to the coordinator; the measurement itself takes at most a few
// seconds, and what was acknowledged by then is the rate.
RateMeasurement measure_transaction_rate(const config::Config& config, const std::string& transactional_id,
                                         std::chrono::milliseconds timeout);

// What `check` says of a measurement: how long the largest Kafka transaction the caps allow takes
// at that rate against transaction.timeout.ms (a warning above half of it), and the largest
// Postgres transaction that can be published within it. `broker_max`: the broker's
// transaction.max.timeout.ms, when known.
std::vector<Finding> transaction_rate_findings(const config::Config& config, const std::string& transactional_id,
                                               const RateMeasurement& measurement,
                                               std::optional<std::chrono::milliseconds> broker_max);

// All of it, for `check`: nothing is measured without the checkpoint topic, or without the
// transactional id (a warning says why).
std::vector<Finding> check_transaction_rate(const config::Config& config, std::chrono::milliseconds timeout,
                                            bool checkpoint_topic_exists,
                                            std::optional<std::chrono::milliseconds> broker_max);

}  // namespace pgoutbox::diagnostics
