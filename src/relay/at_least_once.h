#pragma once

// At-least-once delivery (docs/spec.md I1–I8): records go to Kafka as soon as the stream reads
// them, through an idempotent producer; each acknowledgement completes its record. A failed
// record holds its topic (TopicState), is sent again alone, and after poison.max_retries meets
// poison.policy. A batch Kafka refuses for good stops the producer before anything after it in its
// partition is written (SinkOptions::gapless): its records become suspects, remembered across
// sessions (RefusedRecords), the session restarts at once, and the next one sends each suspect
// alone in its place. The checkpoint goes through the Checkpointer's producer, beside the records.

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "checkpointer.h"
#include "pgoutbox/relay/delivery_cookie.h"
#include "pgoutbox/relay/delivery_path.h"
#include "pgoutbox/relay/poison.h"
#include "poison_policy.h"
#include "send_backlog.h"
#include "sink_handle.h"

namespace pgoutbox::relay {

class AtLeastOnce final : public DeliveryPath {
 public:
  explicit AtLeastOnce(const PathContext& context);

  std::optional<Outcome> open() override;
  void started() override;
  void deliver(const outbox::Record& record, ConfirmTracker::TxnId unit) override;
  void refuse(const outbox::Record& record, ConfirmTracker::TxnId unit, const kafka::DeliveryError& error) override;
  void unit_ended(bool /*caps_reached*/) override {}
  void caught_up() override;
  void reading_paused() override {}
  void stopping() override;
  bool queue_full() const override { return !backlog_.empty(); }
  bool holds_stream() const override { return false; }
  bool whole_units() const override { return false; }
  bool drained() override { return !context_.checkpointer.final_pending(); }
  void poll() override;
  Outcome close(Outcome outcome) override;

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

  void send(const outbox::Record& record, DeliveryCookie cookie);
  bool try_send(const outbox::Record& record, DeliveryCookie cookie);
  bool produce_now(const outbox::Record& record, DeliveryCookie cookie);
  void backlog_round();
  kafka::Sink& sink_for(DeliveryCookie cookie);
  void on_delivery(const kafka::Delivery& delivery);
  void on_failure(const outbox::Record& record, DeliveryCookie cookie, const kafka::DeliveryError& error,
                  bool reported);
  void hold(const outbox::Record& record, DeliveryCookie cookie, const kafka::DeliveryError& error, bool reported);
  void apply_policy(const outbox::Record& record, ConfirmTracker::TxnId unit, const kafka::DeliveryError& error,
                    std::uint32_t attempts);
  void rebuild(const kafka::DeliveryError& error);
  void note_suspect(const outbox::Record& record, ConfirmTracker::TxnId unit, const kafka::DeliveryError& error);
  const RefusedRecord* refused_before(const outbox::Record& record, ConfirmTracker::TxnId unit) const;
  void end_after_gap(const std::string& what, int polls);
  void settle_head(const std::string& topic);
  void post_pump(const std::string& topic);
  void pump(const std::string& topic);
  void schedule_retry(const outbox::Record& record, DeliveryCookie cookie, std::chrono::milliseconds delay);
  void arm_retry();
  bool check_fatal();

  PathContext context_;
  PoisonRules rules_;
  PoisonPolicy poison_;
  SendBacklog backlog_;
  std::unique_ptr<Timer> retry_timer_;
  std::unique_ptr<Timer> pump_timer_;  // runs pump() for to_pump_ from the io_context
  std::unique_ptr<Timer> gap_timer_;   // serves the reports of a refused batch after the producer stopped
  std::shared_ptr<RefusedRecords> refused_;
  std::size_t suspects_noted_ = 0;  // this session's
  bool gap_seen_ = false;
  std::set<std::string> to_pump_;
  bool pump_armed_ = false;
  std::multimap<Clock::time_point, Pending> retries_;      // by due time
  std::map<std::string, TopicState, std::less<>> topics_;  // topics with records in flight or held
  bool closed_ = false;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // what it posts holds it weakly
  SinkHandle main_;
  SinkHandle isolated_;  // batches of one, for retries and dead-letter writes; opened at first need
};

}  // namespace pgoutbox::relay
