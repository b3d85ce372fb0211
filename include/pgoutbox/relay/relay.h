#pragma once

// The pipeline of one session: replication stream → pgoutput decoder → outbox mapping →
// idempotent producer, with confirm-after-ack (ConfirmTracker) feeding the stream's flush
// position, and backpressure on the in-flight caps (I6). One thread, one io_context of the
// session's own: the replication socket, librdkafka's report pipe and the timers are all waited
// on there, so no state is shared between threads, and nothing of a finished session can run
// after it (its pending handlers die with its io_context).
//
// A session ends in one of three ways (Outcome); the caller (app/run) decides what follows:
// exit, reconnect after a backoff, or exit with the error's code.

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/common.h>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "pgoutbox/config/config.h"
#include "pgoutbox/kafka/producer.h"
#include "pgoutbox/outbox/mapping.h"
#include "pgoutbox/pgoutput/relation_cache.h"
#include "pgoutbox/relay/confirm_tracker.h"
#include "pgoutbox/relay/delivery_cookie.h"
#include "pgoutbox/relay/observer.h"
#include "pgoutbox/relay/outcome.h"
#include "pgoutbox/replication/connection.h"
#include "pgoutbox/replication/stream.h"

namespace pgoutbox::relay {

struct Counters {
  std::uint64_t rows_received = 0;     // outbox inserts decoded
  std::uint64_t records_produced = 0;  // handed to the producer
  std::uint64_t records_acked = 0;     // acknowledged by Kafka
  std::uint64_t rows_ignored = 0;      // inserts into tables that are not configured
  std::uint64_t changes_ignored = 0;   // updates, deletes, truncates, logical messages
  std::uint64_t transactions = 0;
  std::uint64_t pauses = 0;            // backpressure engaged
  std::uint64_t poison_retried = 0;    // sends again after Kafka refused a record for good
  std::uint64_t dead_lettered = 0;     // poison records whose dead-letter write was acknowledged
  std::uint64_t skipped = 0;           // poison records dropped under policy skip
};

class Relay : private replication::StreamHandler {
 public:
  // `observer` (may be null) hears about every event and state change; it must outlive the Relay.
  explicit Relay(const config::Config& config, Observer* observer = nullptr);
  ~Relay() override;
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  // Connects, checks the slot and publication, and streams until the session ends. Runs the
  // io_context itself; returns when the session is over.
  Outcome run();

  // Graceful stop: stop reading, wait up to shutdown_timeout for outstanding acks, confirm, close.
  // Call on the session's thread, e.g. from a signal_set on io() or through post(io(), …).
  void stop();

  // The session's io_context, for signal handling and for posting work from other threads.
  boost::asio::io_context& io() { return io_; }

  // True once START_REPLICATION succeeded, until the session ends; readable from any thread
  // (readiness probes, tests).
  bool streaming() const { return streaming_.load(); }

  const Counters& counters() const { return counters_; }
  Lsn confirmed() const { return tracker_.durable(); }
  std::uint64_t in_flight_records() const { return tracker_.outstanding_records(); }
  std::uint64_t in_flight_bytes() const { return in_flight_bytes_; }

 private:
  void connect();
  void on_data(const replication::XLogData& data) override;
  void on_keepalive(const replication::Keepalive& keepalive) override;
  void on_insert(const pgoutput::InsertData& insert);
  void on_report(const kafka::DeliveryReport& report);
  void track(ConfirmTracker::TxnId txn, const outbox::Record& record);
  void send(const outbox::Record& record, DeliveryCookie cookie);
  void complete(ConfirmTracker::TxnId txn, std::size_t weight);
  void on_failure(const outbox::Record& record, DeliveryCookie cookie, rd_kafka_resp_err_t error);
  void apply_policy(const outbox::Record& record, ConfirmTracker::TxnId txn, const std::string& code,
                    const std::string& reason, std::uint32_t attempts);
  void schedule_retry(const outbox::Record& record, DeliveryCookie cookie, std::chrono::milliseconds delay);
  void arm_retry();
  void log_event(spdlog::level::level_enum level, const outbox::Record& record, ConfirmTracker::TxnId txn,
                 const std::string& message) const;
  void wait_reports(kafka::Producer& producer, boost::asio::posix::stream_descriptor& reports);
  kafka::ProducerSettings producer_settings() const;
  kafka::Producer& isolated();
  void arm_poll();
  bool check_producer_fatal();
  void update_flush();
  void apply_backpressure();
  void maybe_finish_stop();
  void finish(Outcome outcome);

  boost::asio::io_context io_;
  const config::Config& config_;
  Observer no_observer_;
  Observer& observer_;
  outbox::Mapping mapping_;
  pgoutput::RelationCache relations_;
  ConfirmTracker tracker_;
  std::optional<replication::Connection> connection_;
  std::unique_ptr<kafka::Producer> producer_;
  std::unique_ptr<replication::Stream> stream_;
  std::optional<boost::asio::posix::stream_descriptor> reports_;
  std::unique_ptr<kafka::Producer> isolated_;  // batches of one, for retries and dead-letter writes
  std::optional<boost::asio::posix::stream_descriptor> isolated_reports_;
  boost::asio::steady_timer poll_timer_;
  boost::asio::steady_timer stop_deadline_;
  boost::asio::steady_timer retry_timer_;

  struct PendingRetry {
    outbox::Record record;
    DeliveryCookie cookie;
  };
  std::multimap<std::chrono::steady_clock::time_point, PendingRetry> retries_;  // by due time

  std::optional<ConfirmTracker::TxnId> txn_;
  outbox::TxnContext txn_context_;
  std::uint64_t in_flight_bytes_ = 0;
  Lsn reported_flush_;
  std::optional<bool> kafka_up_;
  bool stopping_ = false;
  bool closing_ = false;
  std::optional<Outcome> outcome_;
  std::optional<Outcome> pending_outcome_;  // decided, waiting for the stream to close
  std::atomic<bool> streaming_{false};
  Counters counters_;
};

}  // namespace pgoutbox::relay
