#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace pgoutbox::test {

// One outbox row whose transaction is known to have committed.
struct CommittedEvent {
  std::string id;
  std::string topic;       // where pgoutbox must put it: topic_prefix + aggregate type
  std::string key;         // aggregateid
  std::int64_t seq = 0;    // 1, 2, 3 … per key, in commit order
  std::int64_t qty = 0;    // the business quantity in the payload ({"qty": n}), for the consumer
  bool oversized = false;  // padded past Options::oversized_bytes: no topic limit below that takes it
};

// Creates `table` in Debezium's outbox shape with a text id (ids are made by the writer, so a
// transaction whose COMMIT was cut off can be looked up afterwards).
void create_outbox_table(const std::string& dsn, const std::string& table);

// Continuous writers, as an application would be: each thread commits a transaction of several
// outbox rows, pauses, and commits the next. Each thread owns its keys, so per-key sequence
// numbers follow commit order. A failed transaction (Postgres restarting) is retried on a new
// connection until it commits; when the COMMIT itself was cut off, the row is looked up to learn
// whether it committed. Only committed rows are recorded.
class LoadWriter {
 public:
  struct Options {
    std::string dsn;
    std::string table;
    std::string topic_prefix;  // the topic template's constant part
    std::vector<std::string> aggregate_types = {"Order"};
    std::string id_prefix = "ev";  // ids are <id_prefix>-w<thread>-<n>
    int threads = 2;
    int rows_per_transaction = 5;
    int keys_per_thread = 16;
    std::size_t payload_bytes = 200;       // padding inside the JSON payload
    std::chrono::milliseconds pause{100};  // between one thread's transactions
    // The mix an operator's bad day has, each in percent of transactions (0: none). Rolled-back
    // transactions and the rows under a rolled-back savepoint are never recorded: a record of
    // one in Kafka is a phantom.
    std::uint64_t seed = 0;  // 0: a random one; each thread draws from seed + its index
    int big_transaction_percent = 0;
    int big_transaction_rows = 600;  // over the relay's 500-record transaction cap
    int rollback_percent = 0;
    int savepoint_percent = 0;             // some rows inserted and rolled back to a savepoint, the rest kept
    int oversized_percent = 0;             // one row of the transaction padded with oversized_bytes
    std::size_t oversized_bytes = 40'000;  // random hex: at least 20 KB under any codec
  };

  struct Stats {
    std::uint64_t transactions = 0;                   // committed
    std::uint64_t events = 0;                         // committed rows
    std::uint64_t payload_bytes = 0;                  // bytes of the committed payloads
    std::uint64_t failed_attempts = 0;                // a statement or connection failed (then retried)
    std::uint64_t unsure_commits = 0;                 // COMMIT cut off, outcome looked up
    std::uint64_t rolled_back = 0;                    // transactions rolled back on purpose
    std::chrono::milliseconds max_commit_latency{0};  // BEGIN to COMMIT acknowledged, worst case
  };

  explicit LoadWriter(Options options);
  ~LoadWriter();
  LoadWriter(const LoadWriter&) = delete;
  LoadWriter& operator=(const LoadWriter&) = delete;

  void start();
  // Asks every thread to finish its current transaction (retrying until it commits) and joins.
  void stop();

  std::vector<CommittedEvent> committed() const;
  std::uint64_t committed_count() const;
  Stats stats() const;

 private:
  void run_thread(int index);

  Options options_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  mutable std::mutex mutex_;
  std::vector<CommittedEvent> committed_;
  Stats stats_;
};

}  // namespace pgoutbox::test
