// Exactly-once delivery (docs/spec.md I10): the relay's records go into Kafka transactions of
// the one transactional producer. A Kafka transaction holds whole Postgres transactions and, last,
// the checkpoint (their end LSN); it is committed when the stream is caught up or after
// kafka.transaction_interval, and only its commit acknowledges its records to the confirm
// tracker. Anything that makes it fail is aborted, never confirmed: the session ends and the
// next one publishes the same transactions again from the slot, skipping what the checkpoint
// (read back with read_committed) says is committed.
#include <boost/asio/post.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "pgoutbox/relay/relay.h"

namespace pgoutbox::relay {

using namespace std::chrono_literals;

namespace {
// The commit waits for every report first (the records are sent already), so what it waits
// for here is the coordinator's EndTxn: seconds would mean Kafka is away.
constexpr auto kCommitTimeout = 10s;
constexpr auto kAbortTimeout = 5s;
constexpr auto kCommitRetry = 100ms;
// How long a record sent alone waits for what precedes it, and for its own verdict.
constexpr auto kFlushTimeout = 10s;
}  // namespace

bool Relay::ensure_kafka_transaction() {
  if (kafka_txn_open_) return true;
  if (closing_) return false;
  const auto begun = main_.sink->begin_transaction();
  if (!begun.ok()) {
    on_transaction_failure(begun, "beginning a Kafka transaction");
    return false;
  }
  kafka_txn_open_ = true;
  kafka_txn_started_ = clock_.now();
  return true;
}

// Runs inside librdkafka's delivery-report callback, where the record reported still counts as
// outstanding: a commit (which first flushes) or an abort called from here would wait for it
// until its timeout. Both are posted to the io_context instead.
void Relay::on_transactional_delivery(const kafka::Delivery& delivery) {
  ++kafka_txn_reported_;
  if (delivery.error) note_transaction_failure(delivery);
  if (closing_) return;
  if (kafka_txn_failure_) {
    boost::asio::post(io_, [this] { maybe_commit(true); });  // aborts
    return;
  }
  if (commit_ready()) {
    boost::asio::post(io_, [this] {
      if (!closing_ && commit_ready()) finish_commit();
    });
  }
}

// Called at each Postgres commit (`caught_up` false) and whenever the stream has handed over
// everything the server sent (true). Commits when the stream is caught up (low latency at low
// rates), when the transaction has collected for kafka.transaction_interval (throughput while
// draining a backlog), or when the in-flight caps are reached; never inside a Postgres
// transaction.
void Relay::maybe_commit(bool caught_up) {
  if (closing_) return;
  // A refusal aborts, also one reported while a commit waits for its reports: that commit
  // would never come (issue 24 item 1).
  if (kafka_txn_failure_) {
    abort_kafka_transaction("Kafka refused a record of it");
    return;
  }
  if (committing_ || !kafka_txn_open_ || tracker_.in_transaction()) return;
  const auto& limits = config_.limits;
  const bool full =
      tracker_.outstanding_records() >= limits.max_in_flight_records || in_flight_bytes_ >= limits.max_in_flight_bytes;
  const bool due = clock_.now() - kafka_txn_started_ >= config_.kafka.transaction_interval;
  if (caught_up || full || due || stopping_) {
    spdlog::debug("committing the Kafka transaction: {} record(s), {}", kafka_txn_records_.size(),
                  caught_up ? "caught up"
                  : full    ? "caps reached"
                  : due     ? "interval"
                            : "stopping");
    start_commit();
  }
}

void Relay::start_commit() {
  committing_ = true;
  if (!source_->paused()) {
    source_->pause();  // the next Postgres transaction goes into the next Kafka transaction
    paused_for_commit_ = true;
  }
  // The checkpoint goes last, in the same transaction: committed together with the records it
  // covers, or aborted together with them.
  // Behind any record of the transaction that still waits for room in the producer's queue: a
  // checkpoint committed without a record it covers would make the next start skip that record
  // (issue 24 item 5).
  // It names the newest Postgres transaction in or before this Kafka transaction. With none yet
  // in this session (only non-transactional messages, dead-lettered), none is written: a
  // checkpoint names a transaction the next session can prove the history by (docs/spec.md I11).
  const auto& last = tracker_.newest_transaction();
  if (!last) {
    checkpoint_in_txn_ = true;
    if (!closing_ && commit_ready()) finish_commit();
    return;
  }
  const auto checkpoint = kafka::checkpoint_record(config_.checkpoint.topic, checkpoint_at(*last));
  if (!blocked_.empty() || !produce_now(checkpoint, DeliveryCookie::checkpoint())) {
    blocked_.push_back({checkpoint, DeliveryCookie::checkpoint()});
    if (blocked_.size() == 1) arm_queue_full();
    return;  // sent from the queue-full timer; the last report then finishes the commit
  }
  if (!closing_ && commit_ready()) finish_commit();
}

// Everything of the Kafka transaction is handed over, the checkpoint last, and reported.
bool Relay::commit_ready() const {
  return committing_ && checkpoint_in_txn_ && blocked_.empty() && kafka_txn_reported_ == kafka_txn_produced_;
}

void Relay::finish_commit() {
  if (closing_) return;
  if (kafka_txn_failure_) {
    abort_kafka_transaction("Kafka refused a record of it");
    return;
  }
  const auto commit_started = clock_.now();
  const auto committed = main_.sink->commit_transaction(kCommitTimeout);
  spdlog::debug("commit_transaction took {} us ({} since the transaction began)",
                std::chrono::duration_cast<std::chrono::microseconds>(clock_.now() - commit_started).count(),
                std::chrono::duration_cast<std::chrono::microseconds>(commit_started - kafka_txn_started_).count());
  if (committed.status == kafka::TxnStatus::retry) {
    // Kafka is slow or away: the same commit resumes; nothing is confirmed meanwhile.
    spdlog::warn("committing the Kafka transaction is taking long ({}); trying again", committed.message);
    clock_.after(*commit_timer_, kCommitRetry, [this] { finish_commit(); });
    return;
  }
  if (!committed.ok()) {
    on_transaction_failure(committed, "committing the Kafka transaction");
    return;
  }
  ++counters_.kafka_transactions;
  if (const auto& last = tracker_.newest_transaction()) {
    ++counters_.checkpoints_written;
    checkpoint_written_ = last->end_lsn;  // the source is paused from start_commit() to here
  }
  kafka_txn_open_ = false;
  committing_ = false;
  checkpoint_in_txn_ = false;
  kafka_txn_produced_ = 0;
  kafka_txn_reported_ = 0;
  const auto records = std::move(kafka_txn_records_);
  kafka_txn_records_.clear();
  const auto now_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  for (const auto& r : records) {
    if (r.dead_letter) {
      ++counters_.dead_lettered;
      observer_.event_poison(r.table, r.topic, PoisonAction::dead_lettered);
    } else {
      ++counters_.records_acked;
      observer_.event_published(
          r.topic, std::chrono::microseconds(std::max<std::int64_t>(0, now_us - tracker_.commit_time_us(r.txn))));
    }
    tracker_.ack(r.txn);
    in_flight_bytes_ -= std::min<std::uint64_t>(in_flight_bytes_, r.weight);
  }
  observer_.in_flight(tracker_.outstanding_records(), in_flight_bytes_);
  update_flush();
  if (paused_for_commit_ && !stopping_) {
    paused_for_commit_ = false;
    source_->resume();
  }
  apply_backpressure();
  maybe_finish_stop();
}

// Nothing of the transaction is confirmed; the session ends and the next one publishes it again
// from the slot. A record Kafka refused is remembered, so that it meets poison.policy after
// poison.max_retries sessions, as in at-least-once.
void Relay::abort_kafka_transaction(const std::string& why) {
  const bool was_closing = closing_;
  if (kafka_txn_open_) {
    const auto aborted = main_.sink->abort_transaction(kAbortTimeout);
    if (!aborted.ok()) spdlog::warn("aborting the Kafka transaction: {}", aborted.message);
    if (aborted.status == kafka::TxnStatus::fenced) fence_seen_ = "aborting the Kafka transaction: " + aborted.message;
    kafka_txn_open_ = false;
    ++counters_.kafka_transactions_aborted;
  }
  if (was_closing) return;
  std::string cause = why;
  if (kafka_txn_failure_ && kafka_txn_failure_->error) {
    const auto& error = *kafka_txn_failure_->error;
    const auto cookie = DeliveryCookie::unpack(kafka_txn_failure_->cookie);
    for (const auto& failure : kafka_txn_failures_) {
      const auto failed = DeliveryCookie::unpack(failure.cookie);
      if (!failure.record || !failure.error || failed.is_checkpoint() || failed.dead_letter ||
          failure.error->kind != kafka::DeliveryFailure::permanent)
        continue;
      const auto& record = *failure.record;
      auto& refused = (*refused_)[refused_key(record, failed.txn)];
      refused.error = *failure.error;
      if (!failed.isolated) {
        // Refused with its batch: maybe for another record of it. Sent alone next time.
        log_event(spdlog::level::info, record, failed.txn,
                  fmt::format("Kafka refused the record's batch ({}: {}); it is sent alone when its transaction is "
                              "published again",
                              failure.error->code, failure.error->text));
        continue;
      }
      ++refused.attempts;
      ++counters_.poison_retried;
      observer_.event_poison(record.table, record.topic, PoisonAction::retried);
      log_event(
          spdlog::level::warn, record, failed.txn,
          fmt::format("Kafka refused the record ({}: {}); its transaction is aborted and published again "
                      "(attempt {} of {} before poison.policy applies)",
                      failure.error->code, failure.error->text, refused.attempts, config_.poison.max_retries + 1));
    }
    if (kafka_txn_failure_->record && cookie.dead_letter && error.kind == kafka::DeliveryFailure::permanent) {
      // The dead-letter topic refuses it too: nothing safe is left but to stop unconfirmed, as
      // at-least-once does. Retrying would abort the same transaction forever (issue 24 item 4).
      stop_on_refused_dead_letter(*kafka_txn_failure_->record, cookie.txn, error);
      return;
    }
    cause = fmt::format("{} ({}: {})", why, error.code, error.text);
    if (error.kind == kafka::DeliveryFailure::fenced) {
      finish(fenced(error.code + ": " + error.text));
      return;
    }
    // Records failed because the producer is fenced report librdkafka's _FATAL, not the fence.
    if (auto fence = fence_shown()) {
      finish(std::move(*fence));
      return;
    }
  }
  finish(
      Outcome::reconnect(fmt::format("Kafka transaction aborted: {}; nothing of it was confirmed, and it is "
                                     "published again from the slot's confirmed position",
                                     cause)));
}

// True when the session ends because of `result`.
bool Relay::on_transaction_failure(const kafka::TxnResult& result, const char* step) {
  switch (result.status) {
    case kafka::TxnStatus::ok:
      return false;
    case kafka::TxnStatus::fenced:
      kafka_txn_open_ = false;  // a fenced producer can abort nothing
      finish(fenced(fmt::format("{}: {}", step, result.message)));
      return true;
    case kafka::TxnStatus::fatal:
      kafka_txn_open_ = false;
      if (auto fence = fence_shown()) {
        finish(std::move(*fence));
        return true;
      }
      finish(
          Outcome::reconnect(fmt::format("{}: the transactional producer failed ({}); rebuilding it and "
                                         "resuming from the slot's confirmed position",
                                         step, result.message)));
      return true;
    case kafka::TxnStatus::retry:
    case kafka::TxnStatus::abort:
      break;
  }
  abort_kafka_transaction(fmt::format("{} failed: {}", step, result.message));
  return true;
}

// The one outcome of a fence, whichever call or report shows it.
Outcome Relay::fenced(const std::string& what) const {
  if (start_.holds_slot && start_.holds_slot()) {
    return Outcome::reconnect(
        fmt::format("the Kafka producer was fenced ({}) while this instance still holds the slot, so no other "
                    "instance took over: the transaction coordinator aborted a transaction that outlived "
                    "transaction.timeout.ms (a long Kafka outage); nothing of it was confirmed, and the producer is "
                    "rebuilt",
                    what));
  }
  return Outcome::fatal(Fatal::fenced, fmt::format("another pgoutbox instance with transactional.id {} took over "
                                                   "({}); this one writes nothing more",
                                                   start_.transactional_id, what));
}

// The producer's fatal state names a fence: whatever failure showed it first, this instance
// stops writing with the fence's code (a reconnect would wait as a standby, saying nothing).
std::optional<Outcome> Relay::fence_shown() const {
  if (fence_seen_) return fenced(*fence_seen_);
  if (!main_.sink) return std::nullopt;
  const auto fatal = main_.sink->fatal();
  if (!fatal || fatal->kind != kafka::SinkFatal::Kind::fenced) return std::nullopt;
  return fenced(fatal->text);
}

std::string Relay::refused_key(const outbox::Record& record, ConfirmTracker::TxnId txn) const {
  return fmt::format("{}/{}/{}", tracker_.commit_lsn(txn).to_string(), record.topic, record.event_id);
}

void Relay::note_transaction_failure(const kafka::Delivery& delivery) {
  if (!kafka_txn_failure_) kafka_txn_failure_ = delivery;
  if (kafka_txn_failures_.size() < kMaxFailuresKept) kafka_txn_failures_.push_back(delivery);
}

// A suspect goes in a batch of its own: everything before it (in the producer's queue, and
// what waits for room there) is sent and reported first, and nothing after it is queued until
// its own batch is sent, so Kafka's verdict is about it. When Kafka does not take that in time,
// the session ends instead (nothing is confirmed; the record is still a suspect next time): a
// refusal of a batch it shared would be counted against it, and an innocent record
// dead-lettered. The simulator found that case (docs/simulation.md).
void Relay::send_alone_in_transaction(const outbox::Record& record, DeliveryCookie cookie) {
  const auto give_up = [this](const char* what) {
    finish(
        Outcome::reconnect(fmt::format("exactly-once: Kafka did not take {} within {} s; the record Kafka "
                                       "refused with its batch is sent alone when its transaction is "
                                       "published again",
                                       what, kFlushTimeout.count())));
  };
  for (;;) {
    if (!main_.sink->flush(kFlushTimeout)) return give_up("what precedes a record sent alone");
    if (closing_) return;
    while (!blocked_.empty() && try_send(blocked_.front().record, blocked_.front().cookie)) blocked_.pop_front();
    if (closing_) return;
    if (blocked_.empty()) break;
  }
  send(record, cookie);
  if (closing_) return;
  if (!blocked_.empty() || !main_.sink->flush(kFlushTimeout)) give_up("a record sent alone");
}

const RefusedRecord* Relay::refused_before(const outbox::Record& record, ConfirmTracker::TxnId txn) const {
  if (refused_->empty()) return nullptr;
  const auto it = refused_->find(refused_key(record, txn));
  return it == refused_->end() ? nullptr : &it->second;
}

}  // namespace pgoutbox::relay
