#pragma once

// Confirm-after-ack bookkeeping (docs/spec.md I2, I7). Transactions enter in commit order as they
// arrive from the stream; each counts its records not yet acknowledged by Kafka. The durable
// position is the commit end_lsn of the newest transaction such that it and every earlier one
// are fully acknowledged — the only value ever handed to the stream as its flush position.
//
// Publishing never waits on this: many transactions are in flight at once; acks of later
// transactions simply wait here until the earlier ones are acknowledged too.

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "pgoutbox/lsn.h"
#include "pgoutbox/relay/stage_times.h"
#include "pgoutbox/transaction_mark.h"

namespace pgoutbox::relay {

class ConfirmTracker {
 public:
  // A transaction's place in the sequence; carried by each of its records' delivery reports.
  using TxnId = std::uint64_t;

  // Begin of a transaction from the stream. Only one may be open at a time. The commit time
  // (microseconds since the Unix epoch) is kept for commit-to-ack latency; `received_us` is when
  // its Begin arrived, `server_sent_us` when the server wrote it (its XLogData's send time).
  TxnId begin(std::int64_t commit_time_us = 0, Lsn commit_lsn = {}, std::int64_t received_us = 0,
              std::int64_t server_sent_us = 0);
  // What was given to begin(); the transaction must not be confirmed yet.
  std::int64_t commit_time_us(TxnId txn) const;
  Lsn commit_lsn(TxnId txn) const;
  // One more record of the open transaction was handed to the producer.
  void add_record(TxnId txn);
  // The open transaction's Commit: it becomes confirmable once its records are acknowledged.
  // `mark`: what the Commit names it by (none for a unit that is not a Postgres transaction).
  void commit(TxnId txn, Lsn end_lsn, std::optional<TransactionMark> mark = std::nullopt);
  // The end of a unit that is a non-transactional logical message ending at `end_lsn`.
  void commit_message(TxnId txn, Lsn end_lsn);
  // What the trusted checkpoint read at the start covers: what this session covers goes on from
  // it (a message after it extends it, a transaction replaces it).
  void resume_from(const Coverage& covered);
  // A record of `txn` was handed to the producer at `now_us` (its first send or a re-send).
  void sent(TxnId txn, std::int64_t now_us);
  // Kafka acknowledged (or the dead-letter path durably handled) one record of `txn`, at `now_us`.
  void ack(TxnId txn, std::int64_t now_us = 0);

  // A keepalive's walEnd may be confirmed when nothing is in flight and no transaction is half
  // received: every change before it has been handled, so the slot need not keep its WAL (I7).
  // One that arrives while acks are pending is applied once they drain. Committed transactions
  // without outstanding records are folded into their predecessor, so pending_transactions()
  // counts only transactions that wait for Kafka (plus at most one).
  void idle_position(Lsn wal_end);

  // Where the slot may be confirmed up to. Never decreases.
  Lsn durable() const { return durable_; }
  // What a checkpoint of the confirmed position covers (docs/spec.md I11): the newest
  // transaction with a mark at or below durable() and the messages confirmed after it, as
  // durable() may be a keepalive's position. Empty until one is confirmed.
  const Coverage& durable_coverage() const { return durable_covered_; }
  // The same of every unit ended, confirmed or not.
  const Coverage& newest_coverage() const { return newest_covered_; }
  bool idle() const { return txns_.empty(); }
  std::uint64_t outstanding_records() const { return outstanding_; }
  std::size_t pending_transactions() const { return txns_.size(); }
  bool in_transaction() const { return open_.has_value(); }
  // The stage times (stage_times.h) of the transactions with records that became confirmable
  // since the last call, oldest first (at most kKeptTimes: a caller that never reads them costs nothing more).
  std::vector<StageTimes> take_confirmed_times();
  static constexpr std::size_t kKeptTimes = 4096;

 private:
  struct Txn {
    std::uint64_t outstanding = 0;
    bool committed = false;
    Lsn end_lsn;
    std::int64_t commit_time_us = 0;
    StageTimes times;
    bool carried_records = false;
    Lsn commit_lsn;
    std::optional<Coverage> covered;  // what was covered when it (or the newest unit folded into it) ended
  };
  Txn& at(TxnId txn);
  const Txn& at(TxnId txn) const;
  void advance();

  std::deque<Txn> txns_;  // txns_[i] has id first_id_ + i
  TxnId first_id_ = 0;
  TxnId next_id_ = 0;
  std::optional<TxnId> open_;
  std::uint64_t outstanding_ = 0;
  Lsn durable_;
  Lsn idle_pending_;  // the newest keepalive position not yet confirmable
  void ended(Txn& t, Lsn end_lsn);
  Coverage durable_covered_;
  Coverage newest_covered_;
  std::vector<StageTimes> confirmed_times_;
};

}  // namespace pgoutbox::relay
