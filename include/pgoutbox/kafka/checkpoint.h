#pragma once

// The durable checkpoint in Kafka (docs/spec.md I10): one record per slot in a compacted topic,
// keyed by the slot's identity, holding the end LSN of the newest transaction whose records
// Kafka has all acknowledged (at-least-once) or committed (exactly-once, where the checkpoint is
// written inside the same Kafka transaction). On start pgoutbox reads it back and skips every
// transaction it covers: a Postgres crash rewinds the slot to its last checkpointed position,
// and what lies between that and this checkpoint is already in Kafka.
//
// Whether a checkpoint may be trusted is decided by trust_checkpoint() (relay side); this module
// only writes and reads the records.

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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
};

// The record's value: a small JSON object (version 1).
std::string encode(const Checkpoint& checkpoint);
// nullopt when `json` is not a version-1 checkpoint.
std::optional<Checkpoint> decode(std::string_view json);
outbox::Record checkpoint_record(const std::string& topic, const Checkpoint& checkpoint);

struct CheckpointScan {
  std::optional<Checkpoint> mine;  // the newest checkpoint under this slot's key
  // Checkpoints of the same database and slot name written by another system: a recreated
  // cluster, or a copy of the database (reported, never used).
  std::vector<Checkpoint> other_systems;
  // Exactly-once: checkpoints of other slots written with the same transactional id (two
  // configurations sharing one id fence each other).
  std::vector<Checkpoint> same_transactional_id;
  std::string warning;  // set when the topic could not be created as compacted, or read whole
};

struct CheckpointSettings {
  std::string brokers;
  std::map<std::string, std::string> properties;  // the user's librdkafka properties (TLS, SASL)
  std::string topic;
  std::chrono::milliseconds timeout{30'000};
};

// Creates the topic (one partition, cleanup.policy=compact) when it is missing, then reads it to
// its end with isolation.level=read_committed. Throws std::runtime_error when Kafka cannot be
// reached or the topic cannot be read within the timeout.
CheckpointScan read_checkpoints(const CheckpointSettings& settings, const SlotIdentity& identity,
                                const std::string& transactional_id);

}  // namespace pgoutbox::kafka
