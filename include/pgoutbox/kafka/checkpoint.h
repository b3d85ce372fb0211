#pragma once

// The durable checkpoint in Kafka (docs/spec.md I10): one record per slot in a compacted topic,
// keyed by the slot's identity, holding the end LSN of the newest transaction whose records
// Kafka has all acknowledged (at-least-once) or committed (exactly-once, where the checkpoint is
// written inside the same Kafka transaction). On start pgoutbox reads it back and skips every
// transaction it covers: a Postgres crash rewinds the slot to its last checkpointed position,
// and what lies between that and this checkpoint is already in Kafka.
//
// Anyone who can write to the topic can write a record under a slot's key, so a record proves
// nothing by where it sits (docs/spec.md I11): pgoutbox signs each checkpoint with HMAC-SHA256
// under a key only it holds (checkpoint.signing_key_file), and the reader keeps only records whose
// value agrees with their key and, with a key configured, whose signature verifies. Whether a kept
// checkpoint may decide what to skip is decided by trust_checkpoint() (relay side).

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pgoutbox/config/config.h"
#include "pgoutbox/lsn.h"
#include "pgoutbox/outbox/record.h"

namespace pgoutbox::kafka {

// Which slot, on which server, a checkpoint belongs to.
struct SlotIdentity {
  std::string system_id;  // IDENTIFY_SYSTEM's systemid: a new initdb (or a logical copy) has another
  std::string database;
  std::string slot;
  // The record key: one checkpoint per slot of one database of one system.
  std::string key() const { return system_id + "/" + database + "/" + slot; }
};

struct Checkpoint {
  SlotIdentity slot;
  int timeline = 0;              // the server's timeline when it was written
  Lsn lsn;                       // end LSN of the newest transaction fully in Kafka
  std::string delivery;          // "at-least-once" or "exactly-once"
  std::string transactional_id;  // exactly-once: the producer that wrote it
  std::string mac;               // hex HMAC-SHA256 of signed_text() under the signing key; empty: unsigned
};

// The bytes a checkpoint's signature covers: every field but the signature, in a fixed order.
std::string signed_text(const Checkpoint& checkpoint);

// The secret that proves a checkpoint was written by pgoutbox.
class CheckpointKey {
 public:
  // At least kMinBytes bytes; throws std::invalid_argument otherwise.
  explicit CheckpointKey(std::string secret);
  static constexpr std::size_t kMinBytes = config::CheckpointConfig::kMinSigningKeyBytes;
  void sign(Checkpoint& checkpoint) const;
  // Constant-time: true when `checkpoint.mac` is this key's signature of its fields.
  bool verifies(const Checkpoint& checkpoint) const;

 private:
  std::string mac_of(const Checkpoint& checkpoint) const;
  std::string secret_;
};

// The record's value: a small JSON object (version 2; version 1, unsigned, is still read).
std::string encode(const Checkpoint& checkpoint);
// nullopt when `json` is not a version-1 or version-2 checkpoint.
std::optional<Checkpoint> decode(std::string_view json);
outbox::Record checkpoint_record(const std::string& topic, const Checkpoint& checkpoint);

// A record under this slot's key that was not taken as its checkpoint, and why.
struct RefusedCheckpoint {
  int partition = 0;
  std::int64_t offset = 0;
  std::string reason;
};

struct CheckpointScan {
  // The newest checkpoint under this slot's key whose value names this slot and, with a key,
  // whose signature verifies.
  std::optional<Checkpoint> mine;
  // Records under this slot's key that were not kept (at most kMaxRefusedKept, newest last);
  // refused_count counts them all.
  std::vector<RefusedCheckpoint> refused;
  std::uint64_t refused_count = 0;
  static constexpr std::size_t kMaxRefusedKept = 8;
  // Checkpoints of the same database and slot name written by another system: a recreated
  // cluster, or a copy of the database (reported, never used). Kept by the same rules as mine.
  std::vector<Checkpoint> other_systems;
  // Exactly-once: checkpoints of other slots written with the same transactional id (two
  // configurations sharing one id fence each other). Kept by the same rules as mine.
  std::vector<Checkpoint> same_transactional_id;
  std::string warning;  // set when the topic could not be created as compacted, or read whole
};

struct CheckpointSettings {
  std::string brokers;
  std::map<std::string, std::string> properties;  // the user's librdkafka properties (TLS, SASL)
  std::string topic;
  std::chrono::milliseconds timeout{30'000};
};

// Sorts one record of the checkpoint topic into `scan` (the reading loop's step, apart so that
// it can be tested without a broker). `key`: the signing key; null when none is configured, and
// then unsigned records are kept (trust_checkpoint never skips on them).
void scan_record(CheckpointScan& scan, const SlotIdentity& identity, const std::string& transactional_id,
                 const CheckpointKey* key, std::string_view record_key, std::optional<std::string_view> value,
                 int partition, std::int64_t offset);

// Creates the topic (one partition, cleanup.policy=compact) when it is missing, then reads it to
// its end with isolation.level=read_committed. Throws std::runtime_error when Kafka cannot be
// reached or the topic cannot be read within the timeout.
CheckpointScan read_checkpoints(const CheckpointSettings& settings, const SlotIdentity& identity,
                                const std::string& transactional_id, const CheckpointKey* key);

}  // namespace pgoutbox::kafka
