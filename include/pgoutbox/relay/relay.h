#pragma once

// The streaming pipeline of one session: change source → pgoutput decoder → outbox mapping →
// Kafka sink, with confirm-after-ack (ConfirmTracker) feeding the source's flush position, and
// backpressure on the in-flight caps (I6). Session setup lives in session.h; the Kafka client
// behind kafka::Sink; what a failed delivery means in poison.h. Everything runs on the one
// thread of the io_context given, so no state is shared between threads.
//
// A session ends in one of three ways (Outcome); the caller decides what follows: exit,
// reconnect after a backoff, or exit with the error's code.

#include <spdlog/common.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "pgoutbox/config/config.h"
#include "pgoutbox/kafka/sink.h"
#include "pgoutbox/outbox/mapping.h"
#include "pgoutbox/pgoutput/relation_cache.h"
#include "pgoutbox/relay/change_source.h"
#include "pgoutbox/relay/confirm_tracker.h"
#include "pgoutbox/relay/delivery_cookie.h"
#include "pgoutbox/relay/observer.h"
#include "pgoutbox/relay/outcome.h"
#include "pgoutbox/relay/poison.h"

namespace pgoutbox::relay {

struct Counters {
  std::uint64_t rows_received = 0;     // outbox inserts decoded
  std::uint64_t records_produced = 0;  // handed to the producer
  std::uint64_t records_acked = 0;     // acknowledged by Kafka
  std::uint64_t rows_ignored = 0;      // inserts into tables that are not configured
  std::uint64_t changes_ignored = 0;   // updates, deletes, truncates, logical messages
  std::uint64_t transactions = 0;
  std::uint64_t pauses = 0;          // backpressure engaged
  std::uint64_t poison_retried = 0;  // sends again after Kafka refused a record for good
  std::uint64_t dead_lettered = 0;   // poison records whose dead-letter write was acknowledged
  std::uint64_t skipped = 0;         // poison records dropped under policy skip
  std::uint64_t queue_full = 0;      // sends the sink's queue had no room for (retried on a timer)
};

class Relay : private ChangeHandler {
 public:
  // `observer` must outlive the Relay.
  // `ancestry` tells whose partition or inheritance child a relation is (outbox::Mapping); empty:
  // only relations named like a configured table are mapped.
  Relay(const config::Config& config, boost::asio::io_context& io, kafka::SinkFactory sinks, Observer& observer,
        outbox::AncestryLookup ancestry = {});
  ~Relay() override;
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  // Streams from `source` until the session ends; runs the io_context meanwhile. `slot_confirmed`
  // is the slot's confirmed_flush_lsn read at connect: nothing lower is ever confirmed.
  Outcome run(ChangeSource& source, Lsn slot_confirmed);

  // Graceful stop: stop reading, wait up to shutdown_timeout for outstanding acks, confirm, close.
  // Call on the io_context's thread.
  void stop();

  const Counters& counters() const { return counters_; }
  Lsn confirmed() const { return tracker_.durable(); }
  std::uint64_t in_flight_records() const { return tracker_.outstanding_records(); }
  std::uint64_t in_flight_bytes() const { return in_flight_bytes_; }

 private:
  struct Pending {
    outbox::Record record;
    DeliveryCookie cookie;  // isolated: it failed and goes again alone; batched: a later record held
    std::chrono::steady_clock::time_point due{};  // not sent before (a failed record's backoff)
  };
  // Per-key order (docs/spec.md I4) around a failed record. Records already handed to librdkafka
  // cannot be recalled, and the relay learns a record's partition only from its report, so the
  // unit held is the topic: on a failure, nothing more of the topic goes to the batched sink; the
  // records still in flight report (acks pass, failures queue in report order, which is per
  // partition the send order); then the failed ones go alone, one at a time, each settled
  // (acknowledged, dead-lettered, skipped) before the next; then the held later records go in
  // their original order and the topic is released. Holding per key would need an entry for
  // every live key of every in-flight record; per topic costs one counter per topic in flight and
  // stalls only the topic of the failure, for as long as its record takes to settle.
  struct TopicState {
    std::uint64_t in_flight = 0;  // in the batched sink, not yet reported
    std::deque<Pending> failed;   // reported failures of the batched sink, in report order
    std::deque<Pending> waiting;  // later records (and refusals at produce time), in send order
    bool head_busy = false;       // a failed record was sent alone (or waits for its backoff)
    bool held() const { return head_busy || !failed.empty() || !waiting.empty(); }
  };
  struct SinkSlot {
    std::unique_ptr<kafka::Sink> sink;
    std::optional<boost::asio::posix::stream_descriptor> wakeup;
  };

  void on_data(const replication::XLogData& data) override;
  void on_keepalive(const replication::Keepalive& keepalive) override;
  void on_insert(const pgoutput::InsertData& insert);
  void on_delivery(const kafka::Delivery& delivery);
  void track(ConfirmTracker::TxnId txn, const outbox::Record& record);
  void send(const outbox::Record& record, DeliveryCookie cookie);
  bool try_send(const outbox::Record& record, DeliveryCookie cookie);
  void arm_queue_full();
  void complete(ConfirmTracker::TxnId txn, std::size_t weight);
  void on_failure(const outbox::Record& record, DeliveryCookie cookie, const kafka::DeliveryError& error,
                  bool reported);
  void hold(const outbox::Record& record, DeliveryCookie cookie, const kafka::DeliveryError& error, bool reported);
  void settle_head(const std::string& topic);
  void post_pump(const std::string& topic);
  bool produce_now(const outbox::Record& record, DeliveryCookie cookie);
  void pump(const std::string& topic);
  void apply_policy(const outbox::Record& record, ConfirmTracker::TxnId txn, const kafka::DeliveryError& error,
                    std::uint32_t attempts);
  void schedule_retry(const outbox::Record& record, DeliveryCookie cookie, std::chrono::milliseconds delay);
  void arm_retry();
  void log_event(spdlog::level::level_enum level, const outbox::Record& record, ConfirmTracker::TxnId txn,
                 const std::string& message) const;
  void open_sink(SinkSlot& slot, bool isolated);
  void wait_wakeup(SinkSlot& slot);
  kafka::Sink& sink_for(DeliveryCookie cookie);
  void arm_poll();
  bool check_sink_fatal();
  void update_flush();
  void apply_backpressure();
  void maybe_finish_stop();
  void finish(Outcome outcome);

  const config::Config& config_;
  boost::asio::io_context& io_;
  kafka::SinkFactory sinks_;
  Observer& observer_;
  PoisonRules rules_;
  outbox::Mapping mapping_;
  pgoutput::RelationCache relations_;
  ConfirmTracker tracker_;
  ChangeSource* source_ = nullptr;
  SinkSlot main_;
  SinkSlot isolated_;  // batches of one, for retries and dead-letter writes; opened at first need
  boost::asio::steady_timer poll_timer_;
  boost::asio::steady_timer stop_deadline_;
  boost::asio::steady_timer retry_timer_;
  boost::asio::steady_timer queue_full_timer_;
  boost::asio::steady_timer pump_timer_;  // runs pump() for to_pump_ from the io_context
  std::set<std::string> to_pump_;
  bool pump_armed_ = false;
  std::multimap<std::chrono::steady_clock::time_point, Pending> retries_;  // by due time
  std::deque<Pending> blocked_;  // refused with queue_full, in send order; sent before anything new
  std::map<std::string, TopicState, std::less<>> topics_;  // topics with records in flight or held

  std::optional<ConfirmTracker::TxnId> txn_;
  outbox::TxnContext txn_context_;
  std::uint64_t in_flight_bytes_ = 0;
  Lsn reported_flush_;
  std::optional<bool> kafka_up_;
  bool stopping_ = false;
  bool closing_ = false;
  std::optional<Outcome> outcome_;
  std::optional<Outcome> pending_outcome_;  // decided, waiting for the source to close
  Counters counters_;
};

}  // namespace pgoutbox::relay
