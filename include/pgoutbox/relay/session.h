#pragma once

// One replication session: connect, identify the system, check (or create) the publication and
// the slot, validate the slot (replication::validate_slot), start streaming from it, and hand
// the ready stream to the Relay, with the publication watched while it streams
// (publication_watch.h). Each session has an io_context of its own: the replication
// socket, the sink's wake-up descriptors and the timers are all waited on there, so nothing of
// a finished session can run after it.

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <memory>
#include <optional>
#include <string>

#include "pgoutbox/config/config.h"
#include "pgoutbox/kafka/sink.h"
#include "pgoutbox/kafka/topic_limits.h"
#include "pgoutbox/relay/observer.h"
#include "pgoutbox/relay/outcome.h"
#include "pgoutbox/relay/relay.h"

namespace pgoutbox::relay {

struct SessionOptions {
  kafka::SinkFactory sinks;    // empty: the real Kafka producer of config.kafka
  bool ever_streamed = false;  // an earlier session of this process streamed (see pg_failure.h)
  // The walsender of the session before this one, if that session streamed (0: it did not).
  // Exactly-once: the slot found active in another process right after is a takeover.
  int previous_walsender = 0;
  // An earlier session of this process created the slot (it has no checkpoint anywhere yet).
  bool slot_created_earlier = false;
  // Exactly-once: what Kafka refused in earlier sessions (relay.h), shared by them.
  std::shared_ptr<RefusedRecords> refused;
  // Checkpoints found written over another WAL history (relay.h), shared by them.
  std::shared_ptr<RefusedCheckpoints> refused_checkpoints;
  // The configuration file, for the commands a fatal message names; empty: "FILE".
  std::string config_path;
  // Each destination topic's limits (kafka/topic_limits.h), kept across sessions by the caller.
  // Empty: with the real Kafka producer, read from config.kafka's cluster for this session only;
  // with a test's sinks, none.
  std::shared_ptr<kafka::TopicLimits> topic_limits;
};

// The batch.size of a session's producers: under the smallest max.message.bytes of the topics
// known before any row arrives (config::known_topics, read here) and of those earlier sessions
// wrote (docs/spec.md I13). 0 when the producer would refuse the properties. The simulator
// (tests/sim) calls it as Session does.
std::size_t producer_batch_size(const config::Config& config, kafka::TopicLimits* limits);

class Session {
 public:
  // `observer` (may be null) hears about every event and state change; it must outlive the Session.
  explicit Session(const config::Config& config, Observer* observer = nullptr, SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Sets up and streams until the session ends; returns when it is over.
  Outcome run();
  // Graceful stop (Relay::stop). Call on the session's thread, e.g. through post(io(), …).
  void stop() { active_->stop(); }

  boost::asio::io_context& io() { return io_; }
  // True once streaming started, until the session ends; readable from any thread.
  bool streaming() const { return streaming_.load(); }
  // This session reached START_REPLICATION.
  bool streamed() const { return streamed_; }
  // The server process (walsender) of this session's replication connection, once it streamed.
  int walsender_pid() const { return walsender_pid_; }
  // This session or an earlier one of the process (SessionOptions) created the slot.
  bool created_slot() const { return created_slot_; }

  const Counters& counters() const { return relay_.counters(); }
  Lsn confirmed() const { return relay_.confirmed(); }

 private:
  class Setup;
  // Publishes the configured backfills read in `snapshot` (relay/backfill.h); nullopt once every
  // record is acknowledged, else how the session ends.
  std::optional<Outcome> backfill(const std::string& snapshot, SessionStart start);
  Outcome taken_over_if(Outcome outcome) const;

  boost::asio::io_context io_;
  AsioClock clock_{io_};
  const config::Config& config_;
  SessionOptions options_;
  std::size_t batch_size_ = 0;  // the producers' batch.size this session (0: a test's sinks)
  kafka::SinkFactory sinks_;
  Observer no_observer_;
  Observer* observer_;
  Relay relay_;
  // The backfill's: kept until the session ends, as the io_context may still hold its handlers.
  std::optional<config::Config> backfill_config_;
  std::unique_ptr<Observer> backfill_observer_;
  std::optional<Relay> backfill_relay_;
  Relay* active_ = &relay_;  // the one stop() reaches
  std::atomic<bool> streaming_{false};
  bool streamed_ = false;
  int walsender_pid_ = 0;
  bool created_slot_ = false;
};

}  // namespace pgoutbox::relay
