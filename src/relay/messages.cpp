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
  // The message's LSN is the end of its WAL record. It is a unit of its own, which a checkpoint
  // covers after the transaction it names but never names itself (found by the simulator:
  // covered by none, an exactly-once transaction of dead-lettered messages alone wrote no
  // checkpoint, and a Postgres crash dead-lettered them twice under read_committed; named, a
  // forged copy at its position on a restored database made another history's transactions
  // skippable: issue 37 item 3).
  if (other_history(proof_.on_position(message.lsn))) return;
  const auto now_us = wall_us();
  const bool skipping = proof_.skips_message(message.lsn);
  unit_ = OpenUnit{.id = tracker_.begin(now_us, message.lsn, now_us),
                   .context = {message.lsn, now_us, 0},
                   .skipping = skipping,
                   .message = true};
  if (skipping) {
    ++counters_.checkpoint_skipped_rows;
    end_unit(message.lsn);
    return;
  }
  relay_built(builder_.message(message, unit_->context));  // poison NON_TRANSACTIONAL
  end_unit(message.lsn);
}

}  // namespace pgoutbox::relay
