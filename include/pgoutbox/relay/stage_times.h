#pragma once

// Where a transaction's time went on its way from Postgres to Kafka (docs/operating.md "Stage
// latency"): when each stage ended, in microseconds since the Unix epoch. The commit and the
// walsender's write are the server's clock (the Begin message and the XLogData header around it
// carry them); the others are the relay's, so the stage between the two clocks also holds any
// skew between them.

#include <cstdint>

namespace pgoutbox::relay {

struct StageTimes {
  std::int64_t commit_us = 0;       // the transaction committed in Postgres
  std::int64_t server_sent_us = 0;  // the walsender wrote its Begin to the connection (0: not known)
  std::int64_t received_us = 0;     // its Begin reached the relay
  std::int64_t sent_us = 0;         // its last record was handed to the producer
  std::int64_t acked_us = 0;        // Kafka acknowledged its last record (exactly-once: its Kafka commit)
};

}  // namespace pgoutbox::relay
