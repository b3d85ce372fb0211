#pragma once

#include <algorithm>
#include <compare>
#include <cstdint>
#include <optional>

#include "pgoutbox/lsn.h"

namespace pgoutbox {

// One Postgres transaction as pgoutput's Begin and Commit describe it: what a checkpoint names as
// the last transaction it covers (docs/spec.md I11). Two WAL histories that share a position do
// not share a transaction ending there with the same xid and commit timestamp (the timestamp is
// the committing backend's clock, in microseconds), so a stream that hands over this transaction
// at this end LSN is the history the checkpoint was written over, up to it.
struct TransactionMark {
  std::uint32_t xid = 0;
  std::int64_t commit_time = 0;  // pgoutput's: microseconds since 2000-01-01 UTC
  Lsn end_lsn;                   // the Commit's end LSN: what the slot is confirmed to

  constexpr auto operator<=>(const TransactionMark&) const = default;
};

// What a checkpoint covers (docs/spec.md I11): the newest Postgres transaction the stream handed
// over, named by its mark, and the non-transactional logical messages that followed it up to
// `messages_end` (relay/messages.cpp). A message is never named: its content and position are
// the writer's to choose, so a copy of the database restored onto the same timeline can hold a
// forged one at the same place. A resumed stream skips the messages after the named transaction
// only until another transaction shows (another history's), never a transaction past it.
struct Coverage {
  std::optional<TransactionMark> transaction;
  Lsn messages_end;  // zero: no message after the transaction

  // How far the stream is covered.
  Lsn end() const { return std::max(transaction ? transaction->end_lsn : Lsn{}, messages_end); }
  bool empty() const { return end() == Lsn{}; }
  void add_transaction(const TransactionMark& mark) {
    transaction = mark;
    messages_end = {};
  }
  void add_message(Lsn end_lsn) { messages_end = end_lsn; }

  auto operator<=>(const Coverage&) const = default;
};

}  // namespace pgoutbox
