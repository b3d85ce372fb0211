#pragma once

// The durable checkpoint (docs/spec.md I10, I11): read back at the start of a session to skip
// what Kafka already has, and written as the confirmed position advances. At-least-once writes it
// through a producer of its own, at most every checkpoint.interval and once more at a graceful
// stop (write_periodically, final_pending); exactly-once puts record() last into each Kafka
// transaction (exactly_once.h).

#include <functional>
#include <memory>
#include <optional>

#include <boost/asio/io_context.hpp>

#include "pgoutbox/config/config.h"
#include "pgoutbox/kafka/checkpoint.h"
#include "pgoutbox/kafka/sink.h"
#include "pgoutbox/outbox/record.h"
#include "pgoutbox/relay/clock.h"
#include "pgoutbox/relay/confirm_tracker.h"
#include "pgoutbox/relay/counters.h"
#include "pgoutbox/relay/delivery_path.h"
#include "pgoutbox/relay/observer.h"
#include "pgoutbox/relay/outcome.h"
#include "pgoutbox/relay/session_start.h"
#include "pgoutbox/relay/skip_proof.h"
#include "sink_handle.h"

namespace pgoutbox::relay {

// The checkpoint topic refuses pgoutbox's writes for good (no WRITE ACL there, a
// max.message.bytes below a checkpoint record): without them a Postgres crash republishes far
// more (at-least-once) or nothing can commit (exactly-once), so the instance stops (exit 24)
// with the topic and the fix.
// A topic just created may be unknown to a broker for a moment: only the other permanent
// refusals count.
bool refused_for_good(const kafka::DeliveryError& error);
Outcome checkpoint_refused(const config::Config& config, const kafka::DeliveryError& error);

class Checkpointer {
 public:
  // `events` ends the session when the checkpoint topic refuses a write for good.
  Checkpointer(const config::Config& config, boost::asio::io_context& io, Clock& clock, const kafka::SinkFactory& sinks,
               const SessionStart& start, const ConfirmTracker& tracker, Counters& counters, Observer& observer,
               DeliveryEvents& events);

  // Reads the checkpoint topic and judges what it read (checkpoint_trust.h): what the stream may
  // skip goes into `proof`, what the trusted checkpoint covers into `covered`. An outcome: the
  // session ends before it streams.
  std::optional<Outcome> resume(SkipProof& proof, Coverage& covered);
  // The checkpoint record of what `covered` covers, signed when checkpoint.signing_key is set.
  outbox::Record record(const Coverage& covered) const;

  // At-least-once, after a resume: writes the confirmed position every checkpoint.interval;
  // `written` is called after each report.
  void write_periodically(std::function<void()> written);
  // At a graceful stop, once every record is acknowledged: writes the confirmed position if it
  // is newer than the last write; true while that write is pending.
  bool final_pending();
  void stopping() { stopping_ = true; }
  void poll() const { sink_.poll(); }
  void close();

 private:
  void arm();
  void write();
  std::string legacy_transactional_id() const;
  void on_delivery(const kafka::Delivery& delivery);

  const config::Config& config_;
  boost::asio::io_context& io_;
  Clock& clock_;
  const kafka::SinkFactory& sinks_;
  const SessionStart& start_;
  const ConfirmTracker& tracker_;
  Counters& counters_;
  Observer& observer_;
  DeliveryEvents& events_;
  std::optional<kafka::CheckpointKey> key_;  // from checkpoint.signing_key; none: unsigned
  bool active_ = false;                      // read at the start: written this session
  bool stopping_ = false;
  bool closed_ = false;
  std::function<void()> written_;
  std::unique_ptr<Timer> timer_;
  Lsn last_written_;
  std::optional<Lsn> sending_;
  SinkHandle sink_;  // last: its reports reach the members above
};

}  // namespace pgoutbox::relay
