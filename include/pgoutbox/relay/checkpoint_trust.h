#pragma once

// Whether the checkpoint read from Kafka may decide what to skip (docs/spec.md I10, I11). Only
// pgoutbox's own proof may: a checkpoint signed with this instance's key, whose every field
// agrees with this instance (system, database, slot, timeline, delivery mode, transactional id).
// Skipping is also only safe over WAL history that is the same as when the checkpoint was
// written: the same timeline, a server that has really written WAL up to it, and, once streaming,
// the transaction it names (SkipProof, which holds back the confirmation until then). Anything
// else (no signing key, a forged or foreign record, a record of an older version that names no
// transaction, a restored backup, a promoted standby on a new timeline, a recreated cluster, a
// checkpoint an earlier session of this process found written over another history) is reported
// and nothing is skipped: at-least-once stays, only the duplicates are not bounded. A checkpoint
// topic read short of its end (an open transaction hides it) stops exactly-once, which would
// publish committed transactions again on an older checkpoint; at-least-once takes the newest one
// it read, which covers less.

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "pgoutbox/config/config.h"
#include "pgoutbox/kafka/checkpoint.h"
#include "pgoutbox/lsn.h"
#include "pgoutbox/relay/outcome.h"
#include "pgoutbox/transaction_mark.h"

namespace pgoutbox::relay {

// The transactions named by checkpoints that a session found written over another WAL history
// (SkipProof): no checkpoint naming one is trusted again by this process.
using RefusedCheckpoints = std::set<TransactionMark>;

struct ResumeFacts {
  kafka::SlotIdentity identity;
  int timeline = 0;
  Lsn slot_confirmed;   // the slot's confirmed_flush_lsn at connect
  Lsn server_position;  // IDENTIFY_SYSTEM's xlogpos: how far the server's WAL goes
  config::Delivery delivery = config::Delivery::at_least_once;
  std::string transactional_id;
  // The id an earlier version derived for this slot, where it differs (config/transactional_id.h):
  // its checkpoints are this slot's too.
  std::string legacy_transactional_id{};
  std::string checkpoint_topic;  // named in the fixes
  bool signing = false;          // a signing key is configured, and the scan kept only what it verified
  const RefusedCheckpoints* refused = nullptr;
  // This session created the slot: it has no checkpoint anywhere yet.
  bool slot_created = false;
  // The operator accepts, for this start, that exactly-once publishes again what a lost
  // checkpoint topic covered (`run --accept-lost-checkpoint`).
  bool accept_lost_checkpoint = false;
};

struct Resume {
  // What the trusted checkpoint covers (empty: none is trusted). Where it is ahead of the slot,
  // that is already in Kafka and skipped, once the stream has shown its transaction (SkipProof);
  // the checkpoints this session writes go on from it (ConfirmTracker::resume_from).
  Coverage covered;
  // The covered end the stream skips to; zero: nothing to skip.
  Lsn skip_below;
  std::vector<std::string> warnings;  // logged at warn
  std::string note;                   // logged at info
  // Do not start (exactly-once with an id shared by two slots, or its checkpoint hidden).
  std::optional<Outcome> refused;
  std::uint64_t refused_records = 0;  // records under this slot's key not taken as its checkpoint
  // The checkpoint topic did not exist, though the slot is older than this start.
  bool topic_lost = false;
};

Resume trust_checkpoint(const kafka::CheckpointScan& scan, const ResumeFacts& facts);

}  // namespace pgoutbox::relay
