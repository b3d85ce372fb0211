#pragma once

// What the open Kafka transaction was handed, in order, so that a refusal nobody could foresee
// (a broker policy, a topic limit lowered while pgoutbox runs) is served in the same session: the
// transaction is aborted and published again, the refused record alone (docs/spec.md I13),
// instead of a new session replaying it from the slot. Within the in-flight caps, which end a
// Kafka transaction of small Postgres transactions: one Postgres transaction larger than them is
// not kept (memory would grow with it), and a refusal inside it is published again from the slot.

#include <cstdint>
#include <vector>

#include "pgoutbox/outbox/record.h"
#include "pgoutbox/relay/delivery_cookie.h"

namespace pgoutbox::relay {

class TransactionReplay {
 public:
  struct Entry {
    outbox::Record record;
    DeliveryCookie cookie;  // as it was first handed over; a dead-letter write stays one
  };

  TransactionReplay(std::uint64_t max_records, std::uint64_t max_bytes)
      : max_records_(max_records), max_bytes_(max_bytes) {}

  // A record handed to the transaction (or refused by produce(): it is published again too).
  void add(const outbox::Record& record, DeliveryCookie cookie) {
    if (overflowed_) return;
    bytes_ += record.weight();
    if (entries_.size() >= max_records_ || bytes_ > max_bytes_) {
      overflowed_ = true;
      entries_ = {};
      return;
    }
    entries_.push_back({record, cookie});
  }
  // Everything the transaction was handed is kept.
  bool complete() const { return !overflowed_; }
  // The transaction ended: what it was handed, and a fresh start for the next one.
  std::vector<Entry> take() {
    auto entries = std::move(entries_);
    clear();
    return entries;
  }
  void clear() {
    entries_.clear();
    bytes_ = 0;
    overflowed_ = false;
  }

 private:
  const std::uint64_t max_records_;
  const std::uint64_t max_bytes_;
  std::vector<Entry> entries_;
  std::uint64_t bytes_ = 0;
  bool overflowed_ = false;
};

}  // namespace pgoutbox::relay
