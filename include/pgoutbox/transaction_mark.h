#pragma once

#include <compare>
#include <cstdint>

#include "pgoutbox/lsn.h"

namespace pgoutbox {

// One Postgres transaction as pgoutput's Begin and Commit describe it: what a checkpoint names as
// the last transaction it covers (docs/spec.md I11). Two WAL histories that share a position do
// not share a transaction ending there with the same xid and commit timestamp (the timestamp is
// the committing backend's clock, in microseconds), so a stream that hands over this transaction
// at this end LSN is the history the checkpoint was written over, up to it.
// A non-transactional logical message, a unit of its own, is named by xid 0 (never a
// transaction's) and a fingerprint of its prefix and content in place of the commit time
// (relay/messages.cpp).
struct TransactionMark {
  std::uint32_t xid = 0;
  std::int64_t commit_time = 0;  // pgoutput's: microseconds since 2000-01-01 UTC
  Lsn end_lsn;                   // the Commit's end LSN: what the slot is confirmed to

  constexpr auto operator<=>(const TransactionMark&) const = default;
};

}  // namespace pgoutbox
