#pragma once

// The coordinator of one session's stream: change source → pgoutput decoder → outbox mapping →
// a delivery path (delivery_path.h: at-least-once or exactly-once, chosen once per session),
// with confirm-after-ack (ConfirmTracker) feeding the source's flush position, backpressure on
// the in-flight caps (I6), and the session's stop. The checkpoint (checkpointer.h) is read before
// the stream starts; what it lets the stream skip is proven by the stream (SkipProof). Session
// setup lives in session.h; the Kafka client behind kafka::Sink. Everything runs on the one
// thread of the io_context given, so no state is shared between threads.
//
// A session ends in one of three ways (Outcome); the caller decides what follows: exit,
// reconnect after a backoff, or exit with the error's code.

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "pgoutbox/config/config.h"
#include "pgoutbox/kafka/sink.h"
#include "pgoutbox/relay/change_source.h"
#include "pgoutbox/relay/clock.h"
#include "pgoutbox/relay/confirm_tracker.h"
#include "pgoutbox/relay/counters.h"
#include "pgoutbox/relay/delivery_path.h"
#include "pgoutbox/relay/observer.h"
#include "pgoutbox/relay/outcome.h"
#include "pgoutbox/relay/record_builder.h"
#include "pgoutbox/relay/session_start.h"
#include "pgoutbox/relay/skip_proof.h"

namespace pgoutbox::relay {

class Checkpointer;

class Relay : private ChangeHandler, private DeliveryEvents {
 public:
  // `clock` and `observer` must outlive the Relay.
  // `ancestry` tells whose partition or inheritance child a relation is (outbox::Mapping); empty:
  // only relations named like a configured table are mapped.
  Relay(const config::Config& config, boost::asio::io_context& io, Clock& clock, kafka::SinkFactory sinks,
        Observer& observer, outbox::CatalogLookups catalog = {});
  ~Relay() override;
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  // Streams from `source` until the session ends; runs the io_context meanwhile.
  Outcome run(ChangeSource& source, SessionStart start);
  Outcome run(ChangeSource& source, Lsn slot_confirmed) {
    SessionStart start;
    start.slot_confirmed = slot_confirmed;
    return run(source, std::move(start));
  }

  // A header every record of this relay carries besides the mapping's (pgoutbox republish's
  // pgoutbox.republished). Call before run().
  void add_header(outbox::Header header) { builder_.add_header(std::move(header)); }

  // Graceful stop: stop reading, wait up to shutdown_timeout for outstanding acks, confirm, close.
  // Call on the io_context's thread.
  void stop();
  // Ends the session with `outcome`, found outside the stream (the publication watch): what
  // Kafka acknowledged is confirmed, nothing else (I2). Call on the io_context's thread.
  void fail(Outcome outcome);

  // The commit time (Unix microseconds) of the newest transaction that brought a row of the
  // configured table `label` (schema.name) this session: pgoutput sent it, so the publication
  // still carried the table when that transaction committed (docs/spec.md I9). nullopt before
  // the first.
  std::optional<std::int64_t> newest_row_commit(std::string_view label) const {
    return builder_.newest_row_commit(label);
  }

  const Counters& counters() const { return counters_; }
  Lsn confirmed() const { return tracker_.durable(); }
  std::uint64_t in_flight_records() const { return tracker_.outstanding_records(); }
  std::uint64_t in_flight_bytes() const { return in_flight_bytes_; }

 private:
  Outcome stream(ChangeSource& source);

  // The stream (relay.cpp, messages.cpp).
  void on_data(const replication::XLogData& data) override;
  void on_keepalive(const replication::Keepalive& keepalive) override;
  void on_caught_up() override;
  // `sent_time`: the server's send time of the XLogData that carried it (Postgres epoch µs).
  void on_begin(const pgoutput::BeginData& begin, std::int64_t sent_time);
  void on_commit(const pgoutput::CommitData& commit);
  void on_insert(const pgoutput::InsertData& insert);
  void on_message(const pgoutput::MessageData& message);
  void relay_built(Built built);
  void end_unit(Lsn end_lsn, std::optional<TransactionMark> mark = std::nullopt);
  bool other_history(std::optional<std::string> why);

  // What the delivery path reports (DeliveryEvents).
  void completed(ConfirmTracker::TxnId unit, std::size_t weight) override;
  void sent(ConfirmTracker::TxnId unit) override;
  void lightened(std::size_t bytes) override;
  void changed() override;
  void ended(Outcome outcome) override;

  enum class Paused { no, caps, other };  // why reading is paused

  void track(ConfirmTracker::TxnId unit, const outbox::Record& record);
  bool caps_reached() const;
  Paused wanted_pause();
  void update_reading();
  void update_flush();
  void arm_poll();
  void maybe_finish_stop();
  void finish(Outcome outcome);

  const config::Config& config_;
  boost::asio::io_context& io_;
  Clock& clock_;
  kafka::SinkFactory sinks_;
  Observer& observer_;
  RecordBuilder builder_;
  std::string compression_;  // the producer's codec, for what a record weighs in its batch

  // The session.
  SessionStart start_;
  ChangeSource* source_ = nullptr;
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<DeliveryPath> path_;
  ConfirmTracker tracker_;
  SkipProof proof_;  // what the checkpoint lets the stream skip, and the proof the stream owes
  struct OpenUnit {
    ConfirmTracker::TxnId id;
    outbox::TxnContext context;
    bool skipping;         // in Kafka already by the checkpoint (I10)
    bool message = false;  // a non-transactional logical message (messages.cpp)
  };
  std::optional<OpenUnit> unit_;
  bool skip_reported_ = false;
  std::uint64_t in_flight_bytes_ = 0;
  Lsn reported_flush_;
  Paused paused_ = Paused::no;
  bool stopping_ = false;
  bool closing_ = false;
  std::optional<Outcome> outcome_;
  std::optional<Outcome> pending_outcome_;  // decided, waiting for the source to close
  std::unique_ptr<Timer> poll_timer_;
  std::unique_ptr<Timer> stop_deadline_;
  Counters counters_;
};

}  // namespace pgoutbox::relay
