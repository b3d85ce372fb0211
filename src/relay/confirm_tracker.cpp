#include "pgoutbox/relay/confirm_tracker.h"

#include <stdexcept>
#include <string>

namespace pgoutbox::relay {

ConfirmTracker::Txn& ConfirmTracker::at(TxnId txn) {
  return const_cast<Txn&>(static_cast<const ConfirmTracker&>(*this).at(txn));
}

const ConfirmTracker::Txn& ConfirmTracker::at(TxnId txn) const {
  if (txn < first_id_ || txn >= first_id_ + txns_.size()) {
    // A bug, not an input error: a report for a transaction already confirmed would mean a
    // record was counted twice.
    throw std::logic_error("ConfirmTracker: unknown transaction " + std::to_string(txn));
  }
  return txns_[txn - first_id_];
}

ConfirmTracker::TxnId ConfirmTracker::begin(std::int64_t commit_time_us, Lsn commit_lsn, std::int64_t received_us,
                                            std::int64_t server_sent_us) {
  if (open_) throw std::logic_error("ConfirmTracker: Begin while a transaction is open");
  if (txns_.empty()) first_id_ = next_id_;
  txns_.emplace_back();
  txns_.back().commit_time_us = commit_time_us;
  txns_.back().times.commit_us = commit_time_us;
  txns_.back().times.server_sent_us = server_sent_us;
  txns_.back().times.received_us = received_us;
  txns_.back().commit_lsn = commit_lsn;
  open_ = next_id_++;
  return *open_;
}

std::int64_t ConfirmTracker::commit_time_us(TxnId txn) const { return at(txn).commit_time_us; }

Lsn ConfirmTracker::commit_lsn(TxnId txn) const { return at(txn).commit_lsn; }

void ConfirmTracker::add_record(TxnId txn) {
  auto& t = at(txn);
  ++t.outstanding;
  t.carried_records = true;
  ++outstanding_;
}

void ConfirmTracker::sent(TxnId txn, std::int64_t now_us) { at(txn).times.sent_us = now_us; }

void ConfirmTracker::commit(TxnId txn, Lsn end_lsn, std::optional<TransactionMark> mark) {
  if (open_ != txn) throw std::logic_error("ConfirmTracker: Commit of a transaction that is not open");
  auto& t = at(txn);
  if (mark) {
    newest_covered_.add_transaction(*mark);
    t.covered = newest_covered_;
  }
  ended(t, end_lsn);
}

void ConfirmTracker::commit_message(TxnId txn, Lsn end_lsn) {
  if (open_ != txn) throw std::logic_error("ConfirmTracker: end of a message that is not open");
  auto& t = at(txn);
  newest_covered_.add_message(end_lsn);
  t.covered = newest_covered_;
  ended(t, end_lsn);
}

void ConfirmTracker::resume_from(const Coverage& covered) {
  if (!txns_.empty() || open_) throw std::logic_error("ConfirmTracker: resume_from after a unit began");
  newest_covered_ = covered;
  durable_covered_ = covered;
}

void ConfirmTracker::ended(Txn& t, Lsn end_lsn) {
  t.committed = true;
  t.end_lsn = end_lsn;
  open_.reset();
  // A transaction with nothing outstanding behind one that still waits for Kafka adds nothing
  // but its end position: it is confirmable exactly when its predecessor is. Folding it in
  // (the predecessor keeps the newer end LSN) keeps the tracker's size bounded by the
  // transactions that carry records, however many empty commits arrive during an outage
  // (I6); confirm order and I2 are unchanged. Its id is free again: no record carries it.
  if (t.outstanding == 0 && txns_.size() >= 2) {
    auto& predecessor = txns_[txns_.size() - 2];
    if (end_lsn > predecessor.end_lsn) predecessor.end_lsn = end_lsn;
    if (t.covered) predecessor.covered = t.covered;
    txns_.pop_back();
    --next_id_;
  }
  advance();
}

void ConfirmTracker::ack(TxnId txn, std::int64_t now_us) {
  auto& t = at(txn);
  if (t.outstanding == 0) throw std::logic_error("ConfirmTracker: more acks than records");
  --t.outstanding;
  t.times.acked_us = now_us;
  --outstanding_;
  advance();
}

void ConfirmTracker::idle_position(Lsn wal_end) {
  // Ignored while a transaction is half received: its end is past anything the server can
  // have reported, and its records are not all known yet.
  if (open_) return;
  // While acks are pending, every transaction before the keepalive is already here; once they
  // drain, the keepalive's position is safe to confirm (I7), so it is kept until then.
  if (wal_end > idle_pending_) idle_pending_ = wal_end;
  advance();
}

void ConfirmTracker::advance() {
  while (!txns_.empty() && txns_.front().committed && txns_.front().outstanding == 0) {
    if (txns_.front().end_lsn > durable_) durable_ = txns_.front().end_lsn;
    if (txns_.front().covered) durable_covered_ = *txns_.front().covered;
    if (txns_.front().carried_records && confirmed_times_.size() < kKeptTimes) {
      confirmed_times_.push_back(txns_.front().times);
    }
    txns_.pop_front();
    ++first_id_;
  }
  if (txns_.empty() && !open_ && idle_pending_ > durable_) durable_ = idle_pending_;
}

std::vector<StageTimes> ConfirmTracker::take_confirmed_times() {
  std::vector<StageTimes> taken;
  taken.swap(confirmed_times_);
  return taken;
}

}  // namespace pgoutbox::relay
