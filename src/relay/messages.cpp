// Logical decoding messages (docs/outbox-layouts.md "Outbox without a table"): pg_logical_emit_message(true,
// prefix, envelope) written by an application in the transaction of its business change.
//
// A transactional message ('M' with flag 1) comes between its transaction's Begin and Commit, in
// WAL order with the transaction's rows, and only if the transaction committed (docs/pgoutput.md
// §3): it becomes one more record of that transaction, published in order with the rows and
// confirmed with them after Kafka's ack (I2, I3, I4).
//
// A non-transactional message comes alone, as soon as it is decoded, whether or not the
// transaction that wrote it commits. Publishing it could publish an event whose business change
// was rolled back (a phantom, I3); dropping it would lose one silently. So it is refused through
// the poison policy (I8, code NON_TRANSACTIONAL): stop, dead-letter or skip, logged and counted.
// It is tracked as a unit of its own that ends at the message's LSN, so that neither a later
// commit nor a keepalive confirms past it before the policy has handled it (I2, I7).
//
// Messages of other prefixes belong to other applications: ignored, and nothing is held for them.

#include <fmt/format.h>

#include <chrono>

#include "pgoutbox/relay/relay.h"

namespace pgoutbox::relay {

namespace {
// A non-transactional message has no transaction to name: its mark (checkpoint_trust.h) is xid 0
// (never a transaction's) with this fingerprint of its prefix and content as the "commit time",
// so that a checkpoint can name it and a resumed stream prove it (FNV-1a, 63 bits: stable across
// builds and versions, unlike std::hash; a forger is kept out by the checkpoint's signature).
std::int64_t fingerprint(std::string_view prefix, std::string_view content) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  const auto mix = [&](std::string_view bytes) {
    for (const char c : bytes) {
      h ^= static_cast<unsigned char>(c);
      h *= 0x100000001b3ULL;
    }
  };
  mix(prefix);
  mix(std::string_view("\0", 1));
  mix(content);
  return static_cast<std::int64_t>(h >> 1U);
}
}  // namespace

void Relay::on_message(const pgoutput::MessageData& message) {
  if (!builder_.configured(message.prefix)) {
    ++counters_.changes_ignored;
    return;
  }
  ++counters_.messages_received;
  if (message.transactional()) {
    if (!unit_) throw std::logic_error("transactional logical message outside Begin…Commit in the replication stream");
    if (unit_->skipping) {
      ++counters_.checkpoint_skipped_rows;
      return;
    }
    relay_built(builder_.message(message, unit_->context));
    return;
  }
  // pgoutbox does not ask for streaming, so a transaction is sent whole at its commit, and a
  // non-transactional message can only come between transactions.
  if (unit_) throw std::logic_error("non-transactional logical message inside a transaction in the replication stream");
  ++counters_.messages_non_transactional;
  // The message's LSN is the end of its WAL record: a checkpoint at or past it covers it (I10).
  // It is a unit of its own, which a checkpoint may name (found by the simulator: named nowhere,
  // an exactly-once transaction of dead-lettered messages alone wrote no checkpoint, and a
  // Postgres crash dead-lettered them twice under read_committed).
  const TransactionMark mark{0, fingerprint(message.prefix, message.content), message.lsn};
  if (other_history(proof_.on_commit(mark))) return;
  if (message.lsn <= proof_.skip_below()) {
    ++counters_.checkpoint_skipped_rows;
    return;
  }
  const auto now_us = wall_us();
  unit_ = OpenUnit{
      .id = tracker_.begin(now_us, message.lsn, now_us), .context = {message.lsn, now_us, 0}, .skipping = false};
  relay_built(builder_.message(message, unit_->context));  // poison NON_TRANSACTIONAL
  end_unit(message.lsn, mark);
}

}  // namespace pgoutbox::relay
