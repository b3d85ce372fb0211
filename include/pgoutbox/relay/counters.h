#pragma once

// What a session has done, for its summary line, the metrics and the tests.

#include <cstdint>

namespace pgoutbox::relay {

struct Counters {
  std::uint64_t rows_received = 0;               // outbox inserts decoded
  std::uint64_t records_produced = 0;            // handed to the producer
  std::uint64_t records_acked = 0;               // acknowledged by Kafka
  std::uint64_t rows_ignored = 0;                // inserts into tables that are not configured
  std::uint64_t changes_ignored = 0;             // updates, deletes, truncates, messages of prefixes not configured
  std::uint64_t messages_received = 0;           // logical decoding messages of a configured prefix
  std::uint64_t messages_non_transactional = 0;  // of those, refused as poison: not atomic with a transaction
  std::uint64_t transactions = 0;
  std::uint64_t pauses = 0;                           // backpressure engaged
  std::uint64_t poison_retried = 0;                   // sends again after Kafka refused a record for good
  std::uint64_t dead_lettered = 0;                    // poison records whose dead-letter write was acknowledged
  std::uint64_t skipped = 0;                          // poison records dropped under policy skip
  std::uint64_t refused_before_sending = 0;           // records the topic's limits refuse (docs/spec.md I13)
  std::uint64_t queue_full = 0;                       // sends the sink's queue had no room for (retried on a timer)
  std::uint64_t checkpoint_skipped_transactions = 0;  // already in Kafka by the checkpoint (I10)
  std::uint64_t checkpoint_skipped_rows = 0;
  std::uint64_t checkpoints_written = 0;  // acknowledged (at-least-once) or committed (exactly-once)
  std::uint64_t kafka_transactions = 0;   // exactly-once: committed
  std::uint64_t kafka_transactions_aborted = 0;
};

}  // namespace pgoutbox::relay
