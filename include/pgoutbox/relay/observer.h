#pragma once

// What a session tells the outside about itself: the metrics module (and tests) implement this;
// the relay calls it from its own thread, at the moment each thing happens. Every method has an
// empty default, so an observer overrides only what it needs. Implementations must be cheap and
// must not block: they run on the streaming thread, once per event.

#include <chrono>
#include <cstdint>
#include <string_view>

#include "pgoutbox/lsn.h"
#include "pgoutbox/relay/stage_times.h"

namespace pgoutbox::relay {

// Why a record left the normal path (docs/spec.md I8).
enum class PoisonAction {
  retried,        // a permanent error, retried after a backoff
  dead_lettered,  // the DLQ write was acknowledged: the record counts as handled
  skipped,        // policy `skip`: dropped on purpose and confirmed
  stopped,        // policy `stop`: the session ends without confirming it
};

// Why Kafka would refuse a record, known before it is sent (docs/spec.md I13): the refusals
// kafka::predicted_refusal foresees from the topic's limits.
enum class RefusalReason {
  too_large,           // its own one-record batch, compressed, is over the topic's max.message.bytes
  null_key_compacted,  // it has no key, and the topic is compacted
};

class Observer {
 public:
  virtual ~Observer() = default;

  // The replication stream started (Postgres is up for us) / the session ended.
  virtual void session_started() {}
  virtual void session_ended() {}

  // `table` is the configured table of the row (schema.name), or empty where the relay holds only
  // what a delivery report gives back: then the topic, one Kafka was sent, is the table's.

  // An outbox row was decoded into a record for `topic`.
  virtual void event_received(std::string_view /*table*/, std::string_view /*topic*/) {}
  // Kafka acknowledged a record; commit_to_ack is from the transaction's commit time to the ack.
  virtual void event_published(std::string_view /*topic*/, std::chrono::microseconds /*commit_to_ack*/) {}
  // A delivery failed permanently (or a row failed validation) and `action` followed. For a
  // dead-letter write, `topic` is the one the record was going to.
  virtual void event_poison(std::string_view /*table*/, std::string_view /*topic*/, PoisonAction /*action*/) {}
  // The topic's limits say Kafka would refuse the record: it goes to poison.policy unsent (and
  // event_poison follows, once the policy has acted).
  virtual void event_refused_before_sending(std::string_view /*table*/, std::string_view /*topic*/,
                                            RefusalReason /*reason*/) {}

  // Current in-flight records and bytes (after each change of either).
  virtual void in_flight(std::uint64_t /*records*/, std::uint64_t /*bytes*/) {}
  // A transaction with records became confirmable at `confirmed_us`: where its time went.
  virtual void transaction_stages(const StageTimes& /*times*/, std::int64_t /*confirmed_us*/) {}
  // The end of the last change received from the stream, and the last position confirmed.
  virtual void received_lsn(Lsn /*lsn*/) {}
  virtual void confirmed_lsn(Lsn /*lsn*/) {}
  // The stream is paused (backpressure) or reading.
  virtual void paused(bool /*paused*/) {}

  // The backfill of `table` at slot creation (relay/backfill.h): rows read from the snapshot,
  // rows whose records are acknowledged, and all the matching rows (counted in the snapshot).
  virtual void backfill_progress(std::string_view /*table*/, std::uint64_t /*read*/, std::uint64_t /*published*/,
                                 std::uint64_t /*total*/) {}

  // Records under this slot's key in the checkpoint topic that were not taken as its checkpoint
  // (forged, foreign, unsigned while a key is configured), found when a session starts.
  virtual void checkpoints_refused(std::uint64_t /*records*/) {}
  // A session found the checkpoint topic missing (and created it) though the slot is older.
  virtual void checkpoint_topic_lost() {}

  // librdkafka's statistics JSON (statistics.interval.ms), as it comes.
  virtual void kafka_statistics(std::string_view /*json*/) {}
  // Whether at least one broker is reachable, from librdkafka's error and statistics events.
  virtual void kafka_up(bool /*up*/) {}
};

}  // namespace pgoutbox::relay
