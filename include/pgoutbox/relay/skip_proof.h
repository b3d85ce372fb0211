#pragma once

// The proof a resumed stream owes before what it skipped is confirmed (docs/spec.md I11). A
// trusted checkpoint names the last transaction it covers (TransactionMark); the relay skips every
// transaction whose commit starts below that transaction's end, as Kafka has it already. That is
// only so if the server's WAL is the history the checkpoint was written over: a database restored
// from a storage snapshot onto the same timeline has the same system, timeline and, soon, WAL
// positions, but other transactions in them. So nothing past the slot's position at the start of
// the session is confirmed until the stream has handed over the named transaction itself (same
// xid, commit timestamp and end LSN); a stream that goes past its end LSN without it is another
// history, and the session ends with nothing it skipped confirmed.
// The non-transactional messages the checkpoint covers after that transaction (Coverage) are
// skipped until another transaction shows: none came between them in the checkpoint's history,
// so one that does is another history's, and from it on nothing more is skipped.

#include <optional>
#include <string>

#include "pgoutbox/lsn.h"
#include "pgoutbox/transaction_mark.h"

namespace pgoutbox::relay {

class SkipProof {
 public:
  SkipProof() = default;  // nothing to skip
  // Skips what `covered` covers past `slot_confirmed`; confirms nothing past `slot_confirmed`
  // until its transaction is proven.
  SkipProof(const Coverage& covered, Lsn slot_confirmed);

  // Transactions whose commit record starts below this are skipped; zero: none.
  Lsn skip_below() const { return expected_ ? expected_->end_lsn : Lsn{}; }
  bool skips(Lsn commit_lsn) const { return commit_lsn < skip_below(); }
  // Whether the non-transactional message ending at `lsn` is covered: before the named
  // transaction, or after it up to the covered messages' end with no transaction between.
  bool skips_message(Lsn lsn) const { return lsn <= skip_below() || (messages_open_ && lsn <= messages_end_); }
  // The checkpoint's transaction is still to come: skipped transactions are not yet confirmable.
  bool pending() const { return expected_ && !proven_; }
  // The transaction the checkpoint names.
  const std::optional<TransactionMark>& expected() const { return expected_; }
  // What of `durable` may be confirmed to the slot.
  Lsn confirmable(Lsn durable) const { return pending() && durable > hold_ ? hold_ : durable; }

  // What the stream hands over, in order. Each returns why the stream is not the checkpoint's
  // history as soon as it shows, else nullopt.
  std::optional<std::string> on_begin(Lsn commit_lsn, std::uint32_t xid);
  std::optional<std::string> on_commit(const TransactionMark& seen);
  // A position the stream has passed: a keepalive's, a non-transactional message's.
  std::optional<std::string> on_position(Lsn passed) const;

 private:
  std::string differs(const std::string& what) const;
  std::optional<TransactionMark> expected_;
  Lsn hold_;
  bool proven_ = false;
  Lsn messages_end_;
  bool messages_open_ = false;
};

}  // namespace pgoutbox::relay
