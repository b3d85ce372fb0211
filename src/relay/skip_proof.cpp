#include "pgoutbox/relay/skip_proof.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace pgoutbox::relay {

SkipProof::SkipProof(const Coverage& covered, Lsn slot_confirmed)
    : hold_(slot_confirmed),
      messages_end_(covered.messages_end),
      messages_open_(covered.messages_end > slot_confirmed) {
  // A transaction the slot is past is not in the stream: the messages after it alone are left
  // to skip.
  if (covered.transaction && covered.transaction->end_lsn > slot_confirmed) expected_ = covered.transaction;
}

std::string SkipProof::differs(const std::string& what) const {
  return fmt::format(
      "{}, where the checkpoint names the transaction xid {} committed at {} (pgoutput timestamp) ending at {}: the "
      "server's WAL is not the history the checkpoint was written over (a database restored from a storage "
      "snapshot onto the same timeline?)",
      what, expected_->xid, expected_->commit_time, expected_->end_lsn.to_string());
}

std::optional<std::string> SkipProof::on_begin(Lsn commit_lsn, std::uint32_t xid) {
  if (commit_lsn >= skip_below() && messages_open_) {
    messages_open_ = false;
    if (commit_lsn < messages_end_) {
      spdlog::warn(
          "transaction xid {} commits at {}, among the non-transactional messages the checkpoint covers (up to {}), "
          "where its history had none: the server's WAL is another history from here (a database restored from a "
          "storage snapshot?); the messages after it are handled again",
          xid, commit_lsn.to_string(), messages_end_.to_string());
    }
  }
  // A commit at or past the named transaction's end: it was not in the stream before it.
  if (!pending() || commit_lsn < expected_->end_lsn) return std::nullopt;
  return differs(fmt::format("the stream hands over transaction xid {} committing at {}", xid, commit_lsn.to_string()));
}

std::optional<std::string> SkipProof::on_commit(const TransactionMark& seen) {
  if (!pending() || seen.end_lsn < expected_->end_lsn) return std::nullopt;
  if (seen == *expected_) {
    proven_ = true;
    return std::nullopt;
  }
  return differs(fmt::format("the transaction ending at {} is xid {} committed at {}", seen.end_lsn.to_string(),
                             seen.xid, seen.commit_time));
}

std::optional<std::string> SkipProof::on_position(Lsn passed) const {
  // The server sends a transaction when it decodes its commit, before any position past it.
  if (!pending() || passed <= expected_->end_lsn) return std::nullopt;
  return differs(fmt::format("the stream passed {} without that transaction", passed.to_string()));
}

}  // namespace pgoutbox::relay
