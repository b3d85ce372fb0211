#pragma once

#include <cstdint>
#include <string>

#include "batch_publisher.h"
#include "pg.h"

namespace shop {

struct PollerStats {
  std::int64_t batches = 0;    // committed claims with at least one row
  std::int64_t published = 0;  // rows Kafka acknowledged and the poller marked SENT
  std::int64_t failed = 0;     // rows whose publish failed: retries + 1, tried again later

  // NAME=value lines, replaced atomically (write then rename), as stock-consumer's stats.
  void write_file(const std::string& path) const;
};

// The seeds' polling relay over local_message (examples/sql/local_message.sql). One poll is one
// transaction: claim the oldest NEW rows with FOR UPDATE SKIP LOCKED (several pollers share the
// table without publishing a row twice at once), publish them and wait for Kafka's acks, mark
// the acknowledged rows SENT and count a retry on the others, commit.
//
// It is at-least-once and cannot be better: a crash (or a lost connection) after the acks and
// before the COMMIT leaves the batch NEW, and the next poll publishes it again. That window is
// also where a cutover to pgoutbox doubles rows (docs/migrating.md "Switching from a polling relay").
class Poller {
 public:
  // Rows that failed `max_retries` times are no longer claimed: they wait as NEW for an operator.
  Poller(PgConnection& db, BatchPublisher& publisher, int batch_size, int max_retries);

  // Rows claimed by this poll (0: nothing was NEW). Throws PgError; the transaction rolls back.
  int poll_once(PollerStats& stats);

 private:
  PgConnection& db_;
  BatchPublisher& publisher_;
  int batch_size_;
  int max_retries_;
};

}  // namespace shop
