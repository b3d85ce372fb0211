#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "load_writer.h"

namespace pgoutbox::test {

// The business table the test consumer updates: stock per key (sku), with the number of events
// applied to it. The consumer's idempotency table is the one pgoutbox ships (sql/consumer_log.sql).
void install_consumer_tables(const std::string& dsn);

// A consumer as the seeds describe one: a Kafka group consumer that, for each record, inserts
// (consumer, event id) into consumer_log and applies the record to the business table in the
// SAME transaction (the records of one poll share it), commits, and only then commits its
// Kafka offsets (every few records, as a real consumer batches its commits). A repeat fails
// the consumer_log key and changes nothing. A failed database transaction (Postgres
// restarting) is retried until it commits.
class IdempotentConsumer {
 public:
  struct Options {
    std::string bootstrap;
    std::string group;  // also the consumer name in consumer_log
    std::vector<std::string> topics;
    std::string dsn;
    int commit_every = 25;  // offsets are committed after this many records
    // Off: the consumer's commits return before the WAL flush (synchronous_commit = off), much
    // faster on a busy disk. Only for scenarios where Postgres does not crash: a crash could then
    // lose a business update whose Kafka offset was already committed.
    bool durable_commits = true;
  };
  struct Stats {
    std::uint64_t records = 0;     // records consumed
    std::uint64_t applied = 0;     // business updates made
    std::uint64_t repeats = 0;     // records consumer_log recognised as already applied
    std::uint64_t db_retries = 0;  // database transactions retried
  };

  explicit IdempotentConsumer(Options options);
  ~IdempotentConsumer();
  IdempotentConsumer(const IdempotentConsumer&) = delete;
  IdempotentConsumer& operator=(const IdempotentConsumer&) = delete;

  void start();
  // Leaves without committing the offsets of the last records, like a consumer that crashed
  // after its database commit: whoever consumes next gets them again.
  void stop();
  Stats stats() const;

 private:
  void loop();

  Options options_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mutex_;
  Stats stats_;
};

// Whether each event's business effect happened exactly once for `consumer`: consumer_log
// holds exactly the committed ids, and each key's stock and event count equal the sums of its
// committed events.
struct ExactlyOnceReport {
  std::size_t events = 0;   // committed events
  std::size_t logged = 0;   // consumer_log rows of the consumer
  std::size_t missing = 0;  // committed ids not in consumer_log
  std::size_t foreign = 0;  // consumer_log ids that were never committed
  std::size_t keys = 0;
  std::size_t keys_wrong = 0;  // keys whose stock or count differs from the committed sums
  std::vector<std::string> problems;
  bool exact() const { return missing == 0 && foreign == 0 && keys_wrong == 0 && logged == events; }
  std::string summary() const;
};

ExactlyOnceReport check_exactly_once(const std::string& dsn, const std::string& consumer,
                                     const std::vector<CommittedEvent>& committed);

// consumer_log rows of `consumer` (to wait for the consumer to catch up).
std::size_t consumer_log_count(const std::string& dsn, const std::string& consumer);

}  // namespace pgoutbox::test
