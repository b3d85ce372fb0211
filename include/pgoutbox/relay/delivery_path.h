#pragma once

// How records reach Kafka once the stream has read them. The coordinator (relay.h) reads the
// stream, tracks what is outstanding (ConfirmTracker), applies the caps and runs the session's
// stop; behind it, one delivery path chosen once per session by `delivery`:
//   at_least_once.h  records go as soon as they are read; a failed one holds its topic, is sent
//                    again alone, then meets poison.policy (docs/spec.md I4, I8);
//   exactly_once.h   records go into Kafka transactions that hold whole Postgres transactions and
//                    the checkpoint; only a commit acknowledges them (I10).
// A path owns its producers and timers, and tells the coordinator only what DeliveryEvents says.

#include <cstddef>
#include <memory>
#include <optional>

#include <boost/asio/io_context.hpp>

#include "pgoutbox/config/config.h"
#include "pgoutbox/kafka/sink.h"
#include "pgoutbox/outbox/record.h"
#include "pgoutbox/relay/clock.h"
#include "pgoutbox/relay/confirm_tracker.h"
#include "pgoutbox/relay/counters.h"
#include "pgoutbox/relay/observer.h"
#include "pgoutbox/relay/outcome.h"
#include "pgoutbox/relay/session_start.h"

namespace pgoutbox::relay {

class Checkpointer;

// What a delivery path reports to the coordinator.
class DeliveryEvents {
 public:
  virtual ~DeliveryEvents() = default;
  // One record of `unit` is settled for good (acknowledged, dead-lettered or skipped); `weight`:
  // the bytes it counted in flight.
  virtual void completed(ConfirmTracker::TxnId unit, std::size_t weight) = 0;
  // A record of `unit` was handed to the producer (for the stage histograms alone).
  virtual void sent(ConfirmTracker::TxnId unit) = 0;
  // A record in flight now weighs `bytes` less (its dead-letter copy replaced it).
  virtual void lightened(std::size_t bytes) = 0;
  // What the path needs of the stream changed (its queue drained, a commit ended): the
  // coordinator looks at reading and at a pending stop again.
  virtual void changed() = 0;
  // The session ends with `outcome`; the coordinator then calls DeliveryPath::close.
  virtual void ended(Outcome outcome) = 0;
};

class DeliveryPath {
 public:
  virtual ~DeliveryPath() = default;

  // Opens the producer before the stream starts. An outcome: the session cannot start.
  virtual std::optional<Outcome> open() = 0;
  // The stream started.
  virtual void started() = 0;
  // A record of the open unit, already tracked by the coordinator.
  virtual void deliver(const outbox::Record& record, ConfirmTracker::TxnId unit) = 0;
  // A row or message that cannot become a record: poison.policy at once (I8).
  virtual void refuse(const outbox::Record& record, ConfirmTracker::TxnId unit, const kafka::DeliveryError& error) = 0;
  // The stream read a unit's end (a Commit, or a non-transactional message); `caps_reached`:
  // the in-flight caps are reached.
  virtual void unit_ended(bool caps_reached) = 0;
  // The stream handed over everything the server has sent.
  virtual void caught_up() = 0;
  // Reading is paused on the caps: what is outstanding must move on by itself.
  virtual void reading_paused() = 0;
  // The session stops: nothing more is read (after the open unit, see whole_units()).
  virtual void stopping() = 0;

  // Records wait for room in the producer's queue: reading pauses (backpressure).
  virtual bool queue_full() const = 0;
  // The path works on something reading must not interleave with (a commit): reading pauses.
  virtual bool holds_stream() const = 0;
  // Acknowledges only whole Postgres transactions: inside one the caps cannot apply, and a stop
  // reads it to its end.
  virtual bool whole_units() const = 0;
  // After a stop, with nothing outstanding: true once the path has nothing left to finish
  // (it may start that last work, a final checkpoint, and report changed() when done).
  virtual bool drained() = 0;

  // Serves the producers' reports and looks for a fatal producer error (every 200 ms).
  virtual void poll() = 0;
  // The session closes with `outcome`: nothing more is sent, an open Kafka transaction is
  // aborted. Returns the outcome to end with (a fence seen meanwhile ends the instance).
  virtual Outcome close(Outcome outcome) = 0;
};

// What a path is built with; every reference outlives it.
struct PathContext {
  const config::Config& config;
  boost::asio::io_context& io;
  Clock& clock;
  const kafka::SinkFactory& sinks;
  const ConfirmTracker& tracker;
  Counters& counters;
  Observer& observer;
  DeliveryEvents& events;
  Checkpointer& checkpointer;
  const SessionStart& start;
};

// The path `config.delivery` names.
std::unique_ptr<DeliveryPath> make_delivery_path(const PathContext& context);

}  // namespace pgoutbox::relay
