#pragma once

// One simulated schedule (docs/simulation.md): a seed decides the workload, the configuration
// and the faults; the real Relay (coordinator, delivery, transactions, checkpoint) runs against
// the simulated slot and Kafka on virtual time, process after process (crashes, stops and
// restarts, standbys taking over); the invariants are checked at every confirmation and at the
// end. A failing schedule is shrunk: faults are dropped and the workload cut while it still
// fails, and what is left is printed with the arguments that replay it.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pgoutbox/config/config.h"
#include "sim_kafka.h"

namespace pgoutbox::sim {

struct Fault {
  enum class Kind {
    kafka_outage,       // brokers unreachable for `length`
    relay_crash,        // the process is killed; a new one (or the standby) starts after `length`
    relay_stop,         // SIGTERM: a graceful stop; a new process starts after `length`
    postgres_crash,     // the slot rewinds to its last saved position; the session is lost
    connection_lost,    // the replication connection drops
    idempotence_fatal,  // the producer's idempotence state breaks
    // The database is restored from a storage snapshot taken `length` earlier, onto the same
    // timeline (docs/spec.md I11): the WAL and the slot are put back as they were then, and what
    // had been written since is written over by other transactions at the same positions (and
    // non-transactional messages copied at theirs, as a writer could forge them).
    snapshot_restore,
    // The checkpoint topic's ACL is revoked: Kafka refuses every checkpoint. The relay must exit
    // 24 naming it (docs/spec.md I12); `length` after that exit an operator has granted it again
    // and starts pgoutbox.
    checkpoint_refusal,
  };
  Kind kind;
  std::chrono::milliseconds at;
  std::chrono::milliseconds length{0};
  // A kill or a stop comes at `at` or, when set, at the first moment of a producer's life of this
  // kind from `at` on (sim_kafka.h).
  std::optional<SinkEvent> moment{};
};

// An operator lowers a topic's max.message.bytes while the relay runs.
struct LimitChange {
  int topic = 0;  // 0: outbox.event.A, 1: outbox.event.B
  std::chrono::milliseconds at{0};
  std::size_t bytes = 0;
};

struct Schedule {
  std::uint64_t seed = 0;
  config::Delivery delivery = config::Delivery::at_least_once;
  // The workload: transactions of outbox rows, arriving over the first seconds.
  int transactions = 0;
  // The middle transaction is this many malformed rows (Row::malformed) in a row, more than
  // max_in_flight_records (0: none): each is poison before any send, and none may read the relay
  // past its caps (docs/simulation.md, defect 9).
  int poison_run = 0;
  int max_rows = 0;   // per ordinary transaction
  double huge = 0;    // share of transactions of thousands of rows
  double poison = 0;  // share of rows a broker policy refuses, whatever their size
  int keys = 1;
  double messages = 0;  // share of changes written as logical decoding messages
  // The configuration.
  config::PoisonPolicy policy = config::PoisonPolicy::dead_letter;
  std::uint32_t max_retries = 1;
  std::uint64_t max_in_flight_records = 20'000;
  std::chrono::milliseconds checkpoint_interval{1000};
  std::chrono::milliseconds transaction_interval{100};
  bool send_when_caught_up = true;
  bool alternate_producers = true;  // exactly-once: two transactional producers take turns
  // Kafka's behaviour.
  std::size_t queue_capacity = 100'000;
  std::size_t queue_bytes = 0;  // librdkafka's queue limit in bytes (0: none); its rows padded to 0-1,200 bytes
  double commit_aborts = 0;
  bool dead_letter_refuses = false;
  // The producers' transaction.timeout.ms: the coordinator aborts a transaction open longer
  // (librdkafka's default 60 s unless drawn shorter, so Kafka outages outlast it).
  std::chrono::milliseconds transaction_timeout{60'000};
  // Topic limits (docs/spec.md I13): max.message.bytes of outbox.event.A and .B and of the
  // dead-letter topic (Kafka's default unless drawn), one of them perhaps lowered while the relay
  // runs, and rows sized against them.
  std::array<std::size_t, 2> limits{kDefaultLimit, kDefaultLimit};
  std::size_t dead_letter_limit = kDefaultLimit;
  std::optional<LimitChange> lowered;
  double oversized = 0;  // share of rows larger than their topic's limit (the relay can tell)
  double large = 0;      // share of rows larger than batch.size, within their topic's limit
  std::vector<Fault> faults;

  static constexpr std::size_t kDefaultLimit = 1'048'588;  // Kafka's max.message.bytes

  static Schedule from_seed(std::uint64_t seed, config::Delivery delivery);
  // Keeps only the faults whose bit is set in `mask` (bit i: faults[i]).
  Schedule with_faults(std::uint64_t mask) const;
  std::string describe() const;
  std::string replay_arguments() const;
};

struct Verdict {
  bool ok = true;
  std::string failure;  // which invariant, with the evidence
  // What the run came to, for the report.
  std::uint64_t rows = 0;
  std::uint64_t processes = 0;
  std::uint64_t sessions = 0;
  std::uint64_t duplicates = 0;              // copies beyond the first that a read_committed consumer reads
  std::uint64_t refused_before_sending = 0;  // records the relay knew Kafka would refuse (I13)
  std::uint64_t size_refusals = 0;           // batches Kafka refused for their size
  std::uint64_t checkpoint_refusals = 0;     // exits 24: the checkpoint topic refused pgoutbox's writes
  std::uint64_t coordinator_aborts = 0;      // transactions that outlived transaction.timeout.ms
  std::chrono::milliseconds virtual_time{0};
};

Verdict simulate(const Schedule& schedule);

// Schedules first_seed, first_seed + 1, ... of one delivery mode, up to `count` or the first
// failure (which is shrunk).
struct Campaign {
  std::uint64_t schedules = 0;
  std::uint64_t rows = 0;
  std::uint64_t processes = 0;
  std::uint64_t sessions = 0;
  std::uint64_t duplicates = 0;
  std::uint64_t refused_before_sending = 0;
  std::uint64_t size_refusals = 0;
  std::uint64_t checkpoint_refusals = 0;
  std::uint64_t coordinator_aborts = 0;
  std::chrono::milliseconds virtual_time{0};
  std::optional<Schedule> failed;  // shrunk
  Verdict failure;                 // of the shrunk schedule
  // Adds a later range of seeds (its failure, if any, becomes this one's).
  void add(const Campaign& later);
};
Campaign run_campaign(config::Delivery delivery, std::uint64_t first_seed, std::uint64_t count);
std::string report(const Campaign& campaign);

// The smallest schedule derived from a failing one (fewer faults, fewer transactions) that
// still fails; the input if nothing smaller fails.
Schedule shrink(const Schedule& failing);

}  // namespace pgoutbox::sim
