#pragma once

// Where the relay reads changes from: in the daemon the replication stream of a session
// (session.h), in unit tests recorded pgoutput bytes. One io_context thread calls everything.

#include <functional>

#include "pgoutbox/lsn.h"
#include "pgoutbox/relay/outcome.h"
#include "pgoutbox/replication/copy_protocol.h"

namespace pgoutbox::relay {

class ChangeHandler {
 public:
  virtual ~ChangeHandler() = default;
  // One pgoutput message; data.payload is valid only during the call.
  virtual void on_data(const replication::XLogData& data) = 0;
  // Server keepalive: wal_end is the end of the last WAL record the walsender decoded.
  virtual void on_keepalive(const replication::Keepalive& keepalive) = 0;
  // Everything the server sent so far was handed over: a moment to commit a Kafka transaction.
  virtual void on_caught_up() {}
};

class ChangeSource {
 public:
  virtual ~ChangeSource() = default;
  // Begins reading; `on_end` is called once, when the source has ended: stopped after stop(),
  // or how the failure that ended it should be handled.
  virtual void start(ChangeHandler& handler, std::function<void(Outcome)> on_end) = 0;
  // Everything before `lsn` is durably handled (the slot may be confirmed up to it). Never
  // decreases: a lower value is ignored.
  virtual void set_flush(Lsn lsn) = 0;
  // Backpressure: while paused nothing is handed to the handler.
  virtual void pause() = 0;
  virtual void resume() = 0;
  virtual bool paused() const = 0;
  // The highest position received (data or keepalive); never a Relation's or Type's zero.
  virtual Lsn received() const = 0;
  // Clean stop: a last confirmation, then on_end(stopped). Nothing more reaches the handler.
  virtual void stop() = 0;
};

}  // namespace pgoutbox::relay
