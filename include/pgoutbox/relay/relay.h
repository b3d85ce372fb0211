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
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "pgoutbox/config/config.h"
#include "pgoutbox/kafka/checkpoint.h"
#include "pgoutbox/kafka/sink.h"
#include "pgoutbox/outbox/envelope.h"
#include "pgoutbox/outbox/mapping.h"
#include "pgoutbox/pgoutput/relation_cache.h"
#include "pgoutbox/relay/change_source.h"
#include "pgoutbox/relay/checkpoint_trust.h"
#include "pgoutbox/relay/clock.h"
#include "pgoutbox/relay/confirm_tracker.h"
#include "pgoutbox/relay/delivery_cookie.h"
#include "pgoutbox/relay/observer.h"
#include "pgoutbox/relay/outcome.h"
#include "pgoutbox/relay/poison.h"
#include "pgoutbox/relay/skip_proof.h"

namespace pgoutbox::relay {

struct Counters {
  std::uint64_t rows_received = 0;               // outbox inserts decoded
  std::uint64_t records_produced = 0;            // handed to the producer
  std::uint64_t records_acked = 0;               // acknowledged by Kafka
  std::uint64_t rows_ignored = 0;                // inserts into tables that are not configured
  std::uint64_t changes_ignored = 0;             // updates, deletes, truncates, messages of prefixes not configured
  std::uint64_t messages_received = 0;           // logical decoding messages of a configured prefix
  std::uint64_t messages_non_transactional = 0;  // of those, refused as poison: not atomic with a transaction
  std::uint64_t transactions = 0;
  std::uint64_t pauses = 0;                           // backpressure engaged
  std::uint64_t poison_retried = 0;                   // sends again after Kafka refused a record for good
  std::uint64_t dead_lettered = 0;                    // poison records whose dead-letter write was acknowledged
  std::uint64_t skipped = 0;                          // poison records dropped under policy skip
  std::uint64_t queue_full = 0;                       // sends the sink's queue had no room for (retried on a timer)
  std::uint64_t checkpoint_skipped_transactions = 0;  // already in Kafka by the checkpoint (I10)
  std::uint64_t checkpoint_skipped_rows = 0;
  std::uint64_t checkpoints_written = 0;  // acknowledged (at-least-once) or committed (exactly-once)
  std::uint64_t kafka_transactions = 0;   // exactly-once: committed
  std::uint64_t kafka_transactions_aborted = 0;
};

// Exactly-once: records whose Kafka transaction was aborted because Kafka refused them, by
// commit LSN and event id. A refusal ends the session (the whole transaction is published again
// from the slot); this memory, kept across sessions by the caller, counts the attempts, so that
// poison.max_retries and poison.policy apply as in at-least-once. As there, a refusal counts only
// for a record sent alone (Kafka refuses a whole batch when one record of it is too large): a
// record refused in a batch is a suspect (0 attempts), sent alone the next time.
struct RefusedRecord {
  std::uint32_t attempts = 0;
  kafka::DeliveryError error;
};
using RefusedRecords = std::map<std::string, RefusedRecord>;

// Where a session starts from; Session::Setup reads it from the slot and the server.
struct SessionStart {
  Lsn slot_confirmed;  // the slot's confirmed_flush_lsn at connect: nothing lower is ever confirmed
  kafka::SlotIdentity identity;
  int timeline = 0;
  Lsn server_position;           // how far the server's WAL goes (IDENTIFY_SYSTEM's xlogpos)
  std::string transactional_id;  // exactly-once
  // Reads the checkpoint topic; called once the sink is open (after init_transactions). Empty:
  // no checkpoint is read or written this session.
  std::function<kafka::CheckpointScan()> read_checkpoints;
  std::shared_ptr<RefusedRecords> refused;  // exactly-once; empty: a memory for this session only
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
};

class Relay : private ChangeHandler {
 public:
  // `clock` and `observer` must outlive the Relay.
  // `ancestry` tells whose partition or inheritance child a relation is (outbox::Mapping); empty:
  // only relations named like a configured table are mapped.
  Relay(const config::Config& config, boost::asio::io_context& io, Clock& clock, kafka::SinkFactory sinks,
        Observer& observer, outbox::AncestryLookup ancestry = {});
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
  void add_header(outbox::Header header) { extra_headers_.push_back(std::move(header)); }

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
  std::optional<std::int64_t> newest_row_commit(std::string_view label) const;

  const Counters& counters() const { return counters_; }
  Lsn confirmed() const { return tracker_.durable(); }
  std::uint64_t in_flight_records() const { return tracker_.outstanding_records(); }
  std::uint64_t in_flight_bytes() const { return in_flight_bytes_; }

 private:
  struct Pending {
    outbox::Record record;
    DeliveryCookie cookie;    // isolated: it failed and goes again alone; batched: a later record held
    Clock::time_point due{};  // not sent before (a failed record's backoff)
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
  void on_caught_up() override;
  void on_begin(const pgoutput::BeginData& begin);
  void on_commit(const pgoutput::CommitData& commit);
  void on_insert(const pgoutput::InsertData& insert);
  void relay_built(std::variant<outbox::Record, outbox::Poison> built, const std::string& from);
  bool reserved_topic(std::string_view topic) const;
  void end_unit(Lsn end_lsn, std::optional<TransactionMark> mark = std::nullopt);
  // Logical decoding messages (messages.cpp).
  void on_message(const pgoutput::MessageData& message);
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
  void stop_on_refused_dead_letter(const outbox::Record& record, ConfirmTracker::TxnId txn,
                                   const kafka::DeliveryError& error);
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

  // The checkpoint (checkpointer.cpp).
  std::optional<Outcome> resume_from_checkpoint();
  bool other_history(std::optional<std::string> why);
  kafka::Checkpoint checkpoint_at(const TransactionMark& last) const;
  void arm_checkpoint();
  void write_checkpoint();
  void on_checkpoint_delivery(const kafka::Delivery& delivery);
  bool final_checkpoint_pending();

  // Exactly-once (transactions.cpp): one Kafka transaction holds whole Postgres transactions,
  // and the checkpoint; committing it acknowledges them all.
  bool ensure_kafka_transaction();
  void on_transactional_delivery(const kafka::Delivery& delivery);
  void maybe_commit(bool caught_up);
  void start_commit();
  bool commit_ready() const;
  void finish_commit();
  void abort_kafka_transaction(const std::string& why);
  bool on_transaction_failure(const kafka::TxnResult& result, const char* step);
  Outcome fenced(const std::string& what) const;
  std::optional<Outcome> fence_shown() const;
  std::optional<std::string> fence_seen_;  // an abort was answered "fenced"
  std::string refused_key(const outbox::Record& record, ConfirmTracker::TxnId txn) const;
  const RefusedRecord* refused_before(const outbox::Record& record, ConfirmTracker::TxnId txn) const;
  void note_transaction_failure(const kafka::Delivery& delivery);
  void send_alone_in_transaction(const outbox::Record& record, DeliveryCookie cookie);

  const config::Config& config_;
  boost::asio::io_context& io_;
  Clock& clock_;
  kafka::SinkFactory sinks_;
  Observer& observer_;
  PoisonRules rules_;
  outbox::Mapping mapping_;
  outbox::MessageMapping messages_;
  std::vector<std::string> reserved_topics_;  // checkpoint and dead-letter topics: no row routes there
  pgoutput::RelationCache relations_;
  ConfirmTracker tracker_;
  ChangeSource* source_ = nullptr;
  SinkSlot main_;
  SinkSlot isolated_;  // batches of one, for retries and dead-letter writes; opened at first need
  std::unique_ptr<Timer> poll_timer_;
  std::unique_ptr<Timer> stop_deadline_;
  std::unique_ptr<Timer> retry_timer_;
  std::unique_ptr<Timer> queue_full_timer_;
  std::unique_ptr<Timer> pump_timer_;  // runs pump() for to_pump_ from the io_context
  std::set<std::string> to_pump_;
  bool pump_armed_ = false;
  std::multimap<Clock::time_point, Pending> retries_;  // by due time
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

  SessionStart start_;
  bool eos_ = false;  // delivery: exactly-once
  // The checkpoint: which transactions are already in Kafka, and the proof the stream owes.
  SkipProof proof_;
  bool skipping_ = false;  // the open transaction is one of those
  bool skip_reported_ = false;
  bool checkpointing_ = false;
  std::optional<kafka::CheckpointKey> checkpoint_key_;  // from checkpoint.signing_key; none: unsigned
  SinkSlot checkpoint_sink_;                            // at-least-once: checkpoints go alone, beside the records
  std::unique_ptr<Timer> checkpoint_timer_;
  Lsn checkpoint_written_;
  std::optional<Lsn> checkpoint_sending_;

  // Exactly-once: the open Kafka transaction.
  struct InTransaction {
    ConfirmTracker::TxnId txn;
    std::size_t weight;
    std::string table;  // the configured table (metrics labels)
    std::string topic;  // a dead-letter record's: the topic it was refused on
    bool dead_letter;
  };
  bool kafka_txn_open_ = false;
  bool committing_ = false;         // the checkpoint is produced; waiting for the reports, then the commit
  bool checkpoint_in_txn_ = false;  // the commit's checkpoint is handed to the sink
  bool paused_for_commit_ = false;
  Clock::time_point kafka_txn_started_;
  std::vector<InTransaction> kafka_txn_records_;
  std::uint64_t kafka_txn_produced_ = 0;  // records and the checkpoint, handed to the sink
  std::uint64_t kafka_txn_reported_ = 0;
  std::optional<kafka::Delivery> kafka_txn_failure_;  // the first failed report: the transaction aborts
  // Every failed report of the transaction (up to kMaxFailuresKept): a refusal of a batch comes
  // back for each of its records, and only those sent alone are known to be refused themselves.
  std::vector<kafka::Delivery> kafka_txn_failures_;
  static constexpr std::size_t kMaxFailuresKept = 10'000;
  std::unique_ptr<Timer> commit_timer_;
  std::shared_ptr<RefusedRecords> refused_;
  std::vector<outbox::Header> extra_headers_;
  std::map<std::string, std::int64_t, std::less<>> newest_row_commit_;  // by configured table
};

}  // namespace pgoutbox::relay
