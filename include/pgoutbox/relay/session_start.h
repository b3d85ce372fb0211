#pragma once

// What a session starts from and keeps across sessions: the slot's position and identity, the
// checkpoint's reader, and the memories of records and checkpoints Kafka or the history refused.
// Session::Setup fills it (session.cpp); the relay reads it (relay.h).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "pgoutbox/kafka/checkpoint.h"
#include "pgoutbox/kafka/sink.h"
#include "pgoutbox/kafka/topic_limits.h"
#include "pgoutbox/lsn.h"
#include "pgoutbox/relay/checkpoint_trust.h"

namespace pgoutbox::relay {

// Records Kafka refused in a session that ended for it, by their transaction's commit LSN (known
// from its Begin), topic and event id. Exactly-once: the refusal aborted the Kafka transaction;
// at-least-once: the producer stopped at the refused batch (docs/spec.md I4). The next session
// publishes the transaction again from the slot; this memory, kept across sessions by the caller,
// counts the attempts, so that poison.max_retries and poison.policy apply. A refusal counts only
// for a record sent alone (Kafka refuses a whole batch when one record of it is refused): a
// record refused in a batch is a suspect (0 attempts), sent alone the next time. A session's
// start forgets what the slot confirmed (prune_refused).
struct RefusedRecord {
  std::uint32_t attempts = 0;
  kafka::DeliveryError error;
};
using RefusedRecords = std::map<std::pair<Lsn, std::string>, RefusedRecord>;
// The key of a record of the transaction committing at `commit_lsn`: its topic, its event id and
// a hash of its key and payload, so that two rows of one transaction with the same id (a
// deliverable one and one Kafka refuses) are two records (issue 37 item 7). The memory lives in
// one process, where std::hash is stable; the key and payload are what every replay builds again.
inline std::pair<Lsn, std::string> refused_key(Lsn commit_lsn, const outbox::Record& record) {
  // A missing key and an empty one alike: librdkafka reports an empty key as none.
  const std::string_view key = record.key ? std::string_view(*record.key) : std::string_view();
  const std::size_t content = std::hash<std::string_view>{}(record.value) * 31U + std::hash<std::string_view>{}(key);
  return {commit_lsn, record.topic + '\0' + record.event_id + '\0' + std::to_string(content)};
}
// Forgets the records of transactions the slot confirmed (they commit below `confirmed`).
inline void prune_refused(RefusedRecords& refused, Lsn confirmed) {
  refused.erase(refused.begin(), refused.lower_bound({confirmed, std::string()}));
}

// Where a session starts from; Session::Setup reads it from the slot and the server.
struct SessionStart {
  Lsn slot_confirmed;  // the slot's confirmed_flush_lsn at connect: nothing lower is ever confirmed
  kafka::SlotIdentity identity;
  int timeline = 0;
  Lsn server_position;           // how far the server's WAL goes (IDENTIFY_SYSTEM's xlogpos)
  std::string transactional_id;  // exactly-once
  bool slot_created = false;     // this session created the slot: no checkpoint of it exists yet
  // Reads the checkpoint topic; called once the sink is open (after init_transactions). Empty:
  // no checkpoint is read or written this session.
  std::function<kafka::CheckpointScan()> read_checkpoints;
  // False for a backfill: its chunks are transactions at positions of its own (2n+1, 2n+2) that
  // no checkpoint may name (docs/spec.md I11: a checkpoint names a real transaction of the slot);
  // exactly-once commits its Kafka transactions without one.
  bool write_checkpoints = true;
  std::shared_ptr<RefusedRecords> refused;  // empty: a memory for this session only
  // Checkpoints found written over another WAL history, kept across sessions by the caller;
  // empty: a memory for this session only.
  std::shared_ptr<RefusedCheckpoints> refused_checkpoints;
  // Exactly-once: true while this session still holds the slot (session.cpp asks the server).
  // Only the slot's holder initialises the transactional producer, so a fence seen meanwhile is
  // not another instance's: it is the coordinator's abort of a transaction that outlived
  // transaction.timeout.ms in a long Kafka outage, and the session reconnects instead of
  // exiting 22. Empty: every fence is another instance's.
  std::function<bool()> holds_slot;
  // Called at every Relation message. pgoutput sends one before a relation's first change of
  // the session and again after its description changed: the publication watch checks then
  // (session.cpp). Empty: nothing is called.
  std::function<void()> relation_arrived;
  // Each destination topic's limits (docs/spec.md I13): a record they refuse meets poison.policy
  // before it is sent. Empty: none are known (a test's sinks).
  std::shared_ptr<kafka::TopicLimits> topic_limits;
  // The producers' batch.size this session: a topic whose max.message.bytes is below it ends the
  // session at once, and the next one's producers keep their batches under it. 0: not compared.
  std::size_t batch_size = 0;
  // The jitter of poison.retry_backoff's delays (Backoff's seed); 0: random. The simulator sets
  // it, so that a seed replays exactly.
  std::uint64_t jitter_seed = 0;
};

}  // namespace pgoutbox::relay
