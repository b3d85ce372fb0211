#pragma once

// Whether the checkpoint read from Kafka may decide what to skip (docs/spec.md I10, I11). Only
// pgoutbox's own proof may: a checkpoint signed with this instance's key, whose every field
// agrees with this instance (system, database, slot, timeline, delivery mode, transactional id).
// Skipping is also only safe over WAL history that is the same as when the checkpoint was
// written: the same timeline, and a server that has really written WAL up to it. Anything else
// (no signing key, a forged or foreign record, a restored backup, a promoted standby on a new
// timeline, a recreated cluster) is reported and nothing is skipped: at-least-once stays, only
// the duplicates are not bounded.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pgoutbox/config/config.h"
#include "pgoutbox/kafka/checkpoint.h"
#include "pgoutbox/lsn.h"
#include "pgoutbox/relay/outcome.h"

namespace pgoutbox::relay {

struct ResumeFacts {
  kafka::SlotIdentity identity;
  int timeline = 0;
  Lsn slot_confirmed;   // the slot's confirmed_flush_lsn at connect
  Lsn server_position;  // IDENTIFY_SYSTEM's xlogpos: how far the server's WAL goes
  config::Delivery delivery = config::Delivery::at_least_once;
  std::string transactional_id;
  bool signing = false;  // a signing key is configured, and the scan kept only what it verified
};

struct Resume {
  Lsn skip_below;                     // transactions whose commit record starts below this are already in Kafka
  std::vector<std::string> warnings;  // logged at warn
  std::string note;                   // logged at info
  std::optional<Outcome> refused;     // do not start (exactly-once with an id shared by two slots)
  std::uint64_t refused_records = 0;  // records under this slot's key not taken as its checkpoint
};

Resume trust_checkpoint(const kafka::CheckpointScan& scan, const ResumeFacts& facts);

}  // namespace pgoutbox::relay
