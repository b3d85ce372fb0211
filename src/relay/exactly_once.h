#pragma once

// Exactly-once delivery (docs/spec.md I10): the records go into Kafka transactions, one open at a
// time, of one transactional producer or of two taking turns (kafka.alternate_producers). A Kafka transaction holds
// whole Postgres transactions and, last, the checkpoint (their end LSN); it is committed when the stream is caught up,
// after kafka.transaction_interval or when the caps are reached, and only its commit acknowledges its records. Anything
// that makes it fail is aborted, never confirmed: the session ends and the next one publishes the same transactions
// again from the slot, skipping what the checkpoint (read back with read_committed) says is committed. A record Kafka
// refuses for good is the exception: the transaction is aborted and published again in the same session, the record
// alone, until it meets poison.policy (docs/spec.md I13).

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpointer.h"
#include "pgoutbox/relay/delivery_cookie.h"
#include "pgoutbox/relay/delivery_path.h"
#include "poison_policy.h"
#include "send_backlog.h"
#include "sink_handle.h"
#include "transaction_replay.h"

namespace pgoutbox::relay {

class ExactlyOnce final : public DeliveryPath {
 public:
  explicit ExactlyOnce(const PathContext& context);

  std::optional<Outcome> open() override;
  void started() override {}
  void deliver(const outbox::Record& record, ConfirmTracker::TxnId unit) override;
  void refuse(const outbox::Record& record, ConfirmTracker::TxnId unit, const kafka::DeliveryError& error) override;
  void unit_ended(bool caps_reached) override { maybe_commit(caps_reached); }
  void caught_up() override { maybe_commit(true); }
  void reading_paused() override;
  void stopping() override;
  bool queue_full() const override { return !backlog_.empty(); }
  bool holds_stream() const override { return committing_; }
  bool whole_units() const override { return true; }
  bool drained() override { return !committing_; }
  void poll() override;
  Outcome close(Outcome outcome) override;

 private:
  // A record of the open Kafka transaction: acknowledged when it commits.
  struct InTransaction {
    ConfirmTracker::TxnId unit;
    std::size_t weight;
    std::string table;  // the configured table (metrics labels)
    std::string topic;  // a dead-letter record's: the topic it was refused on
    bool dead_letter;
  };

  void send(const outbox::Record& record, DeliveryCookie cookie);
  bool try_send(const outbox::Record& record, DeliveryCookie cookie);
  void backlog_round();
  void apply_policy(const outbox::Record& record, ConfirmTracker::TxnId unit, const kafka::DeliveryError& error,
                    std::uint32_t attempts);
  void send_alone(const outbox::Record& record, DeliveryCookie cookie);
  bool flush_unless_doomed();
  bool ensure_transaction();
  void on_delivery(const kafka::Delivery& delivery);
  void maybe_commit(bool now);
  void start_commit();
  bool commit_ready() const;
  void finish_commit();
  bool settle_open(int attempts);
  void count_published(const std::vector<InTransaction>& records);
  void abort_and_end(const std::string& why);
  void publish_again(const std::string& cause);
  void on_transaction_failure(const kafka::TxnResult& result, const char* step);
  void note_failure(const kafka::Delivery& delivery);
  Outcome fenced(const std::string& what) const;
  std::optional<std::string> outlived_timeout() const;
  std::optional<Outcome> fence_shown() const;
  std::pair<Lsn, std::string> refused_key(const outbox::Record& record, ConfirmTracker::TxnId unit) const;
  const RefusedRecord* refused_before(const outbox::Record& record, ConfirmTracker::TxnId unit) const;
  template <typename F>
  void later(F f);  // posted to the io_context; dropped if this path is gone by then

  PathContext context_;
  PoisonPolicy poison_;
  SendBacklog backlog_;
  std::unique_ptr<Timer> commit_timer_;
  std::shared_ptr<RefusedRecords> refused_;
  std::optional<std::string> fence_seen_;  // an abort was answered "fenced"
  bool stopping_ = false;
  bool closed_ = false;

  // The open Kafka transaction.
  bool open_ = false;
  bool committing_ = false;         // the checkpoint is produced; waiting for the reports, then the commit
  bool commit_pending_ = false;     // commit_transaction() timed out: librdkafka expects it resumed
  bool checkpoint_in_txn_ = false;  // the commit's checkpoint is handed to the sink
  Clock::time_point started_{};     // when the open Kafka transaction began (the one a failure ended); zero: none
  const std::chrono::milliseconds transaction_timeout_;
  std::vector<InTransaction> records_;
  TransactionReplay replay_;    // what records_ holds, and what produce() refused, to publish again
  bool replayed_ = false;       // the open transaction publishes an aborted one again
  int quiet_replays_ = 0;       // in a row, after a failure that taught nothing (abort_and_end)
  std::uint64_t produced_ = 0;  // records and the checkpoint, handed to the sink
  std::uint64_t reported_ = 0;
  std::optional<kafka::Delivery> failure_;  // the first failed report: the transaction aborts
  // Every failed report of the transaction (up to kMaxFailuresKept): a refusal of a batch comes
  // back for each of its records, and only those sent alone are known to be refused themselves.
  std::vector<kafka::Delivery> failures_;
  static constexpr std::size_t kMaxFailuresKept = 10'000;

  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // what it posts holds it weakly
  // Last: their reports reach the members above. With kafka.alternate_producers, the second
  // takes every other Kafka transaction; `current_` holds the open one.
  std::array<SinkHandle, 2> producers_;
  std::size_t current_ = 0;
  SinkHandle& producer() { return producers_[current_]; }
};

}  // namespace pgoutbox::relay
