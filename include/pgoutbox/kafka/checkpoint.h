#pragma once

// The durable checkpoint in Kafka (docs/spec.md I10): one record per slot in a compacted topic,
// keyed by the slot's identity, naming the newest transaction whose records Kafka has all
// acknowledged (at-least-once) or committed (exactly-once, where the checkpoint is written inside
// the same Kafka transaction): its end LSN, xid and commit timestamp. On start pgoutbox reads it
// back and skips every transaction it covers: a Postgres crash rewinds the slot to its last
// checkpointed position, and what lies between that and this checkpoint is already in Kafka. The
// skipped transactions are confirmed only once the stream has shown that transaction again
// (relay/skip_proof.h): a restored copy of the database on the same timeline has other
// transactions there.
//
// Anyone who can write to the topic can write a record under a slot's key, so a record proves
// nothing by where it sits (docs/spec.md I11): pgoutbox signs each checkpoint with HMAC-SHA256
// under a key only it holds (checkpoint.signing_key_file), and the reader keeps only records whose
// value agrees with their key and, with a key configured, whose signature verifies. Whether a kept
// checkpoint may decide what to skip is decided by trust_checkpoint() (relay side).

#include <algorithm>
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
#include "pgoutbox/transaction_mark.h"

namespace pgoutbox::kafka {

// Which slot, on which server, a checkpoint belongs to.
struct SlotIdentity {
  std::string system_id;  // IDENTIFY_SYSTEM's systemid: a new initdb (or a logical copy) has another
  std::string database;
  std::string slot;
  // The record key: one checkpoint per slot of one database of one system.
  std::string key() const { return system_id + "/" + database + "/" + slot; }
};

// The version written. Versions 1 (unsigned) and 2 (signed, its LSN maybe a keepalive's) are
// still read, and never trusted to skip (relay/checkpoint_trust.h).
inline constexpr int kCheckpointVersion = 3;

struct Checkpoint {
  SlotIdentity slot;
  int timeline = 0;              // the server's timeline when it was written
  Lsn lsn;                       // end LSN of the newest transaction fully in Kafka; zero: none yet
  std::string delivery;          // "at-least-once" or "exactly-once"
  std::string transactional_id;  // exactly-once: the producer that wrote it
  std::string mac;               // hex HMAC-SHA256 of signed_text() under the signing key; empty: unsigned
  // Version 3: that transaction's xid and commit timestamp (0 in older versions).
  std::uint32_t xid = 0;
  std::int64_t commit_time = 0;
  int version = kCheckpointVersion;
  // Version 3: the end of the non-transactional messages after that transaction it covers (zero:
  // none; absent from the record and from what is signed).
  Lsn messages_end{};

  // The transaction it names as the last one it covers: none when xid is 0. Only a checkpoint
  // of an older pgoutbox names a non-transactional message by xid 0 and an LSN.
  std::optional<TransactionMark> transaction() const {
    if (xid == 0) return std::nullopt;
    return TransactionMark{xid, commit_time, lsn};
  }
  bool names_a_message() const { return xid == 0 && lsn != Lsn{}; }
  Coverage covers() const { return {transaction(), messages_end}; }
  // How far the stream is covered.
  Lsn end() const { return std::max(lsn, messages_end); }
};

// A checkpoint of `slot` covering `covered` (version 3, unsigned).
Checkpoint checkpoint_of(const SlotIdentity& slot, const Coverage& covered);

// The bytes a checkpoint's signature covers: every field of its version but the signature, in a
// fixed order, after a line naming the version.
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

// The record's value: a small JSON object of the checkpoint's version.
std::string encode(const Checkpoint& checkpoint);
// nullopt when `json` is not a checkpoint of version 1, 2 or 3.
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
  std::string warning;  // set when the topic could not be read whole
  // Why the topic cannot keep a slot's checkpoint safely, found at every read: a cleanup.policy
  // without compact (Kafka deletes a quiet slot's newest checkpoint after retention.ms) or more
  // than one partition (a slot's checkpoints in two partitions have no order). Empty: fit, or its
  // configuration could not be read.
  std::string unfit;
  // The cluster did not know the topic: this read created it (CheckpointSettings::create_missing)
  // or left it missing. It holds no checkpoint; a slot older than this start then has lost its
  // checkpoints (checkpoint_trust.h).
  bool topic_missing = false;
  // Set when a newer checkpoint may be hidden: an open Kafka transaction held a partition's last
  // stable offset (where read_committed ends) below the high watermark seen at the start of the
  // read for all of CheckpointSettings::hidden_wait. `mine` is then the newest checkpoint before
  // it, maybe not the newest one (docs/spec.md I11).
  std::string hidden;
  // Where: the partition and the offset at which read_committed ends (the open transaction's
  // first record), for the fix that aborts it.
  int hidden_partition = -1;
  std::int64_t hidden_offset = -1;
};

struct CheckpointSettings {
  std::string brokers;
  std::map<std::string, std::string> properties;  // the user's librdkafka properties (TLS, SASL)
  std::string topic;
  // How long a step may take without an answer: the topic's metadata, and the read, which ends
  // with an error only after this long without a record (it takes as long as the volume needs).
  std::chrono::milliseconds timeout{30'000};
  // A topic the cluster does not know is created (compacted, one partition). Off where a missing
  // topic stops the start (exactly-once, the slot older than it): the next start must find it
  // missing again, not empty.
  bool create_missing = true;
  // How long to wait for an open transaction that hides the end of the topic (hidden_end_wait).
  std::chrono::milliseconds hidden_wait{0};
};

// How long the reader waits for an open transaction to stop hiding the end of the topic: in
// exactly-once, where an older checkpoint would publish committed transactions again, as long as
// the transaction coordinator may leave a dead producer's transaction open (the
// transaction.timeout.ms of `properties`, librdkafka's 60 s by default; the same configuration is
// assumed for every instance sharing the topic) plus a margin for its abort (the coordinator
// looks for expired transactions every 10 s by default); in at-least-once, where an older one is
// safe, as long as a live instance keeps one open (kafka.transaction_interval, at most 10 s).
std::chrono::milliseconds hidden_end_wait(const std::map<std::string, std::string>& properties, bool exactly_once);

// Sorts one record of the checkpoint topic into `scan` (the reading loop's step, apart so that
// it can be tested without a broker). `key`: the signing key; null when none is configured, and
// then unsigned records are kept (trust_checkpoint never skips on them).
// No checkpoint is larger (a few hundred bytes; its names are bounded by Postgres's and Kafka's).
inline constexpr std::size_t kMaxCheckpointBytes = 8192;

void scan_record(CheckpointScan& scan, const SlotIdentity& identity, const std::string& transactional_id,
                 const CheckpointKey* key, std::string_view record_key, std::optional<std::string_view> value,
                 int partition, std::int64_t offset);

// Creates the topic (one partition, cleanup.policy=compact) when the cluster says it does not
// exist and settings.create_missing (an answer that is not definite is asked again until the
// timeout), then reads it with
// isolation.level=read_committed up to the high watermark each partition had when the read began:
// read_committed stops at the last stable offset, before any transaction still open (another
// slot's instance killed in a transaction), and a newer checkpoint of this slot may lie past it.
// While one does, it waits up to settings.hidden_wait, saying why, then sets scan.hidden. Throws
// std::runtime_error when Kafka cannot be reached, or no record comes for settings.timeout.
// Creates the checkpoint topic unless Kafka says it exists; throws std::runtime_error when no
// definite answer comes within settings.timeout or the creation is refused. Called before a
// replication slot is created, so that a slot without its checkpoint topic is one whose topic
// was lost, never one whose first start died before creating it (exit 25).
void ensure_checkpoint_topic(const CheckpointSettings& settings);

CheckpointScan read_checkpoints(const CheckpointSettings& settings, const SlotIdentity& identity,
                                const std::string& transactional_id, const CheckpointKey* key);

}  // namespace pgoutbox::kafka
