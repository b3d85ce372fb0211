#pragma once

// The simulator's Kafka: one partition per topic, idempotent and transactional producers with
// fencing by epoch, batches cut by bytes (batch.size) and refused whole, each topic's
// max.message.bytes (which an operator may lower while it runs), refusals no limit explains (a
// broker policy), acknowledgements that get lost after the write, outages during which nothing
// is written and records wait, a full producer queue (by records, and by bytes), a fatal
// idempotence error, a transaction a failed record doomed (produce() answers _STATE until it is
// aborted), coordinator aborts (INVALID_PRODUCER_EPOCH or INVALID_TXN_STATE, abortable), a
// commit that succeeds while its call times out (resumed, it answers success), a checkpoint topic
// whose ACL refuses every write (TOPIC_AUTHORIZATION_FAILED), and the records a killed producer
// still had in flight. Every answer is given as librdkafka's code and, for a transactional call,
// its fatal/retriable/abortable flags; what it means to the relay is decided by the daemon's own
// mapping (kafka::delivery_error, kafka::txn_result, kafka::sink_fatal in kafka/producer.h).
// A transactional call and flush block the relay's thread for virtual time (a round trip to the
// coordinator; while the brokers are down, until they are back or the call's timeout), during
// which only the world's callbacks run (VirtualClock::block): the relay's timers fire late, as in
// the daemon. A transaction a failed record doomed sends none of the records it still holds
// until it is aborted (librdkafka's abortable state), so a flush inside it waits out its timeout.
// The coordinator aborts a transaction open longer than transaction.timeout.ms and bumps its
// id's epoch, fencing its producer. Not modelled: the last stable offset (a read_committed
// reader here never waits for an open transaction; with one process at a time, each fencing
// every id of the slot before it reads, none is open there), and metadata errors (unknown
// topics, leader changes). Everything happens on the simulation's virtual clock
// (tests/support/virtual_clock.h); a seeded generator makes every choice, so a seed replays
// exactly.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "../support/virtual_clock.h"
#include "pgoutbox/kafka/checkpoint.h"
#include "pgoutbox/kafka/sink.h"
#include "pgoutbox/kafka/topic_limits.h"

namespace pgoutbox::sim {

using Rng = std::mt19937_64;
using Time = relay::Clock::time_point;

struct KafkaFaults {
  std::vector<std::pair<Time, Time>> outages;  // brokers unreachable: nothing written, commits wait
  double commit_aborts = 0;                    // a commit the coordinator answers with an abortable error
  std::size_t queue_capacity = 100'000;        // records a producer holds unreported before "queue full"
  std::size_t queue_bytes = 0;                 // and their bytes (0: no limit in bytes)
  Time idempotence_fatal = Time::max();        // from then on every producer open is fatally broken once
  // Commits that may succeed while their call times out (the coordinator's answer later than the
  // call's timeout, which the relay's thread waits out): each costs kCommitTimeout, so a few.
  int late_commits = 0;
  bool dead_letter_refuses = false;  // the dead-letter topic refuses every record
  std::string dead_letter_topic;
  // The checkpoint topic refuses every record (an ACL revoked: TOPIC_AUTHORIZATION_FAILED) while
  // set; Simulation sets it at a fault and clears it when an operator has granted it again.
  bool checkpoint_refuses = false;
  std::string checkpoint_topic;
  // The producers' transaction.timeout.ms: a transaction open longer is aborted by the
  // coordinator, which bumps its id's epoch (Kafka 4's transactions): its producer is fenced.
  std::chrono::milliseconds transaction_timeout{60'000};
};

// A batch Kafka refused for its size (MSG_SIZE_TOO_LARGE), for the simulation's checks.
struct SizeRefusal {
  std::string topic;
  std::size_t bytes = 0;    // the batch's
  std::size_t records = 0;  // in the batch
  std::size_t limit = 0;    // the topic's max.message.bytes when it was refused
  bool isolated = false;    // from a producer of batches of one
  // The relay's reading of the topic's limit when the batch's first record was produced (see
  // LimitWatch::reading).
  std::uint64_t reading = 0;
};

// What the simulation follows of the limits as producers use them (simulation.cpp's checks).
// Moments of a producer's life a fault can be triggered by (simulation.h, Fault::moment).
enum class SinkEvent {
  queue_full,      // produce() answered "queue full": a record now waits in the relay's backlog
  commit_started,  // commit_transaction() was called
  report_served,   // a delivery report is about to be handed to the relay
};

struct LimitWatch {
  // Which reading of `topic`'s limit the relay holds now (0: none).
  std::function<std::uint64_t(const std::string& topic)> reading;
  // A record was handed to a producer; `bytes` is what it adds to a batch.
  std::function<void(const outbox::Record& record, std::size_t bytes)> produced;
  std::function<void(const SizeRefusal&)> size_refused;
  // The reports of a size refusal of a batched producer were handed to the relay.
  std::function<void(std::uint64_t reading)> size_refusal_reported;
  // A moment of a producer's life (may throw: a process killed at that moment).
  std::function<void(SinkEvent)> event;
};

class SimKafka {
 public:
  SimKafka(test::VirtualClock& clock, Rng& rng, KafkaFaults faults)
      : clock_(clock), rng_(rng), faults_(std::move(faults)) {}

  struct Entry {
    outbox::Record record;
    std::uint64_t txn = 0;  // 0: not transactional
  };

  // Producers whose batches hold up to `batch_size` bytes (librdkafka's batch.size).
  kafka::SinkFactory factory(std::size_t batch_size);
  // A topic's max.message.bytes (Kafka's default unless set); set_limit changes it at once.
  std::size_t limit(const std::string& topic) const;
  void set_limit(const std::string& topic, std::size_t bytes) { limits_[topic] = bytes; }
  // What a record adds to a batch: its encoded size (kafka::batch_bytes without compression,
  // which the simulated relay is configured with, less the batch's header).
  static std::size_t record_bytes(const outbox::Record& record);
  static constexpr std::size_t kBatchHeader = 61;  // a v2 record batch's header (record_size.cpp)
  void add_outage(Time from, Time to) { faults_.outages.emplace_back(from, to); }
  void refuse_checkpoints(bool refuses) { faults_.checkpoint_refuses = refuses; }
  // Takes one of the late commit answers the schedule allows; false when none is left.
  bool late_commit() { return faults_.late_commits > 0 && faults_.late_commits-- > 0; }
  // Refusals of a checkpoint served to the relay (its delivery report) since the count was last
  // set back (Simulation: at each process's start).
  std::uint64_t checkpoints_refused() const { return checkpoints_refused_; }
  void checkpoint_refusal_served() { ++checkpoints_refused_; }
  void count_checkpoint_refusals_anew() { checkpoints_refused_ = 0; }
  void break_idempotence_at(Time when) { faults_.idempotence_fatal = std::min(faults_.idempotence_fatal, when); }
  bool down() const;
  Time up_again() const;  // now, or when the outage under way ends
  const KafkaFaults& faults() const { return faults_; }
  test::VirtualClock& clock() { return clock_; }
  Rng& rng() { return rng_; }

  // What a read_committed consumer reads of `topic`, in log order.
  std::vector<const outbox::Record*> visible(const std::string& topic) const;
  // How many copies of `event_id` a read_committed consumer reads in `topic`.
  int visible_copies(const std::string& topic, const std::string& event_id) const;
  // A checkpoint reader under read_committed, as kafka::read_checkpoints does it.
  kafka::CheckpointScan read_checkpoints(const std::string& topic, const kafka::SlotIdentity& identity,
                                         const std::string& transactional_id, const kafka::CheckpointKey* key) const;
  std::set<std::string> topics() const;

  // The producers' side (sim_kafka.cpp's SimSink).
  void write(const outbox::Record& record, std::uint64_t txn);
  std::uint64_t begin_txn(const std::string& transactional_id, std::uint32_t epoch);
  void end_txn(std::uint64_t txn, bool commit);
  // A committed transaction whose producer's process went before its relay learned of the commit
  // (the call had answered with a timeout); never_learned: the events of `topic` such
  // transactions hold, which that relay could not count.
  void commit_never_learned(std::uint64_t txn) { unlearned_txns_.insert(txn); }
  std::set<std::string> never_learned(const std::string& topic) const;
  std::uint32_t bump_epoch(const std::string& transactional_id);  // aborts the id's open transaction
  // The coordinator's timeout: the id's open transaction, once older than transaction_timeout, is
  // aborted and the id's epoch bumped (checked whenever one of its producers calls Kafka).
  void expire(const std::string& transactional_id);
  std::uint64_t coordinator_aborts() const { return coordinator_aborts_; }
  std::uint32_t epoch(const std::string& transactional_id) const;
  // The refusal a broker policy gives the record whatever its size (poison rows, a dead-letter
  // topic that refuses everything), or nullopt.
  std::optional<kafka::DeliveryError> policy_refusal(const outbox::Record& record) const;
  bool fatal_due();  // the idempotence fault fires now (once)
  // Told the records of each Kafka transaction as it commits (visible to read_committed by then).
  std::function<void(const std::vector<const outbox::Record*>&)> on_commit;
  // Records refused only because their batch held a refused record, or was too large (for the
  // report).
  std::set<std::string> refused_with_batch;
  LimitWatch watch;

 private:
  enum class TxnState { open, committed, aborted };
  struct Txn {
    std::string transactional_id;
    TxnState state = TxnState::open;
    std::vector<std::pair<std::string, std::size_t>> entries;  // topic, index
    Time began{};
  };
  void count_visible(const Entry& entry, int delta);

  test::VirtualClock& clock_;
  Rng& rng_;
  std::uint64_t checkpoints_refused_ = 0;
  KafkaFaults faults_;
  std::map<std::string, std::vector<Entry>> logs_;
  std::set<std::uint64_t> unlearned_txns_;
  std::vector<Txn> txns_;  // txn id - 1
  std::map<std::string, std::uint32_t> epochs_;
  std::map<std::string, std::uint64_t> open_txns_;  // transactional id → its open transaction
  std::uint64_t coordinator_aborts_ = 0;
  std::map<std::string, std::size_t> limits_;     // max.message.bytes by topic
  std::unordered_map<std::string, int> visible_;  // topic + '\0' + event id → copies
  bool fatal_fired_ = false;
};

}  // namespace pgoutbox::sim
