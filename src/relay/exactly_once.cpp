#include "exactly_once.h"

#include <algorithm>

#include <boost/asio/post.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "dead_letter.h"
#include "pgoutbox/config/transactional_id.h"
#include "pgoutbox/kafka/producer.h"

namespace pgoutbox::relay {

using namespace std::chrono_literals;

namespace {
// The commit waits for every report first (the records are sent already), so what it waits
// for here is the coordinator's EndTxn: seconds would mean Kafka is away.
constexpr auto kCommitTimeout = 10s;
constexpr auto kAbortTimeout = 5s;
// At a session's end, a call that times out is resumed so many times (each kAbortTimeout) before
// the session ends without a verdict; a stop tries once.
constexpr int kSettleAttempts = 6;
constexpr auto kCommitRetry = 100ms;
// How long a record sent alone waits for what precedes it, and for its own verdict.
constexpr auto kFlushTimeout = 10s;
constexpr auto kInitTimeout = 30s;
}  // namespace

ExactlyOnce::ExactlyOnce(const PathContext& context)
    : context_(context),
      poison_(context.config.poison, context.tracker, context.counters, context.observer, context.events),
      backlog_(
          context.clock, [this](const outbox::Record& r, DeliveryCookie c) { return try_send(r, c); },
          [this] { backlog_round(); }),
      commit_timer_(context.clock.timer()),
      refused_(context.start.refused ? context.start.refused : std::make_shared<RefusedRecords>()),
      transaction_timeout_(kafka::transaction_timeout(context.config.kafka.properties)),
      replay_(context.config.limits.max_in_flight_records, context.config.limits.max_in_flight_bytes) {}

template <typename F>
void ExactlyOnce::later(F f) {
  boost::asio::post(context_.io, [alive = std::weak_ptr<int>(alive_), f = std::move(f)] {
    if (!alive.expired()) f();
  });
}

std::optional<Outcome> ExactlyOnce::open() {
  const bool alternate = context_.config.kafka.alternate_producers;
  const std::size_t count = alternate ? producers_.size() : 1;
  const auto id_of = [this](std::size_t i) {
    return i == 0 ? context_.start.transactional_id
                  : config::alternate_transactional_id(context_.start.transactional_id);
  };
  for (std::size_t i = 0; i < count; ++i) {
    kafka::SinkOptions options;
    options.transactional_id = id_of(i);
    options.on_delivery = [this](const kafka::Delivery& d) { on_delivery(d); };
    if (auto refused = open_stream_sink(context_, producers_[i], std::move(options), i == 0)) return refused;
  }
  // Instances of one slot may be configured differently: an older one with alternate producers
  // may hold a transaction open on the alternate id, frozen, while this one, without them, takes
  // over; woken, it would commit what this one publishes again. So every id any configuration of
  // the slot uses is fenced: without alternate producers, a producer of the alternate id is
  // initialised too, then closed (issue 37 item 2).
  std::unique_ptr<kafka::Sink> fence_only;
  if (!alternate) {
    kafka::SinkOptions options;
    options.transactional_id = id_of(1);
    options.on_delivery = [](const kafka::Delivery&) {};
    try {
      fence_only = context_.sinks(std::move(options));
    } catch (const std::invalid_argument& e) {
      return Outcome::fatal(Fatal::kafka_config, e.what());
    }
  }
  const auto sink_of = [&](std::size_t i) -> kafka::Sink& { return i < count ? *producers_[i] : *fence_only; };
  // Fences every older producer of these transactional ids (a paused instance that the slot's
  // new holder replaced) and aborts the transactions they left open. Both initialisations run
  // at once (against a coordinator that does not know an id yet, each takes about a second):
  // librdkafka carries on with a call that timed out, and the next call waits for it.
  std::array<kafka::TxnResult, 2> init;
  for (std::size_t i = 0; i < init.size(); ++i) init[i] = sink_of(i).init_transactions(0ms);
  for (std::size_t i = 0; i < init.size(); ++i) {
    if (init[i].status == kafka::TxnStatus::retry) init[i] = sink_of(i).init_transactions(kInitTimeout);
    if (init[i].ok()) continue;
    if (i == 1 && !alternate && init[i].message.starts_with("TRANSACTIONAL_ID_AUTHORIZATION_FAILED")) {
      // Without WRITE on the alternate id, no instance of this principal can have used it.
      spdlog::info(
          "exactly-once: transactional id {} is refused by the ACLs ({}), so no instance of this principal can "
          "have left a transaction open on it: not fenced",
          id_of(1), init[i].message);
      continue;
    }
    return Outcome::reconnect(fmt::format(
        "initialising Kafka transactions (transactional.id {}) failed: {}{}", id_of(i), init[i].message,
        i == 0      ? ""
        : alternate ? "; the alternate producer's id needs the ACLs the first one has (WRITE and DESCRIBE on the "
                      "transactional id), or set kafka.alternate_producers: false"
                    : "; this instance fences the id instances with kafka.alternate_producers use, lest one of them "
                      "commits a transaction it left open"));
  }
  spdlog::info("exactly-once: Kafka transactions with transactional.id {}{}", id_of(0),
               alternate ? fmt::format(" and {} in turn", id_of(1)) : fmt::format(" ({} fenced)", id_of(1)));
  return std::nullopt;
}

void ExactlyOnce::deliver(const outbox::Record& record, ConfirmTracker::TxnId unit) {
  // Kafka refused it in an earlier session's transaction: retried, then the policy (I8).
  if (const auto* refused = refused_before(record, unit)) {
    if (refused->attempts > context_.config.poison.max_retries) {
      apply_policy(record, unit, refused->error, refused->attempts);
      return;
    }
    send_alone(record, DeliveryCookie::alone(unit, refused->attempts));
    return;
  }
  send(record, DeliveryCookie::batched(unit));
}

void ExactlyOnce::refuse(const outbox::Record& record, ConfirmTracker::TxnId unit, const kafka::DeliveryError& error) {
  apply_policy(record, unit, error, 0);
}

void ExactlyOnce::apply_policy(const outbox::Record& record, ConfirmTracker::TxnId unit,
                               const kafka::DeliveryError& error, std::uint32_t attempts) {
  if (auto dead_letter = poison_.apply(record, unit, error, attempts))
    send(*dead_letter, DeliveryCookie::dead_letter_write(unit));
}

// Paused between transactions (the producer's queue was full at the end of one, and more is
// outstanding than the caps resume at): only a commit acknowledges those records, and a paused
// stream brings no boundary that would start it. The simulator found this stall.
void ExactlyOnce::reading_paused() {
  if (open_ && !committing_) later([this] { maybe_commit(true); });
}

// A Postgres transaction is never split across Kafka transactions: one half read is read to its
// end (whole_units()), then committed with the rest.
void ExactlyOnce::stopping() {
  stopping_ = true;
  if (!context_.tracker.in_transaction()) maybe_commit(true);
}

void ExactlyOnce::poll() {
  for (const auto& producer : producers_) {
    producer.poll();
    if (!producer.is_open()) continue;
    const auto fatal = producer->fatal();
    if (!fatal) continue;
    if (fatal->kind == kafka::SinkFatal::Kind::fenced) {
      context_.events.ended(fenced(fatal->text));
      return;
    }
    context_.events.ended(Outcome::reconnect("the Kafka producer hit a fatal error (" + fatal->text +
                                             "); rebuilding it and resuming from the slot's confirmed position"));
    return;
  }
}

Outcome ExactlyOnce::close(Outcome outcome) {
  if (closed_) return outcome;
  closed_ = true;
  backlog_.cancel();
  commit_timer_->cancel();
  settle_open(outcome.kind == Outcome::Kind::stopped ? 1 : kSettleAttempts);
  // Whatever ends the session (a lost replication connection, say), a producer the abort or
  // librdkafka found fenced ends the instance: a reconnect would wait as a standby, silent.
  if (outcome.kind != Outcome::Kind::fatal) {
    if (auto fence = fence_shown()) return std::move(*fence);
  }
  return outcome;
}

void ExactlyOnce::send(const outbox::Record& record, DeliveryCookie cookie) {
  if (!backlog_.send(record, cookie)) context_.events.changed();  // nothing new is read while the queue is full
}

bool ExactlyOnce::try_send(const outbox::Record& record, DeliveryCookie cookie) {
  if (closed_ || !ensure_transaction()) return true;  // the session is ending
  kafka::DeliveryError error;
  switch (producer()->produce(record, cookie.pack(), error)) {
    case kafka::Sink::Produced::ok:
      ++produced_;
      if (cookie.is_checkpoint()) {
        checkpoint_in_txn_ = true;
      } else {
        context_.events.sent(cookie.txn);
        const auto source =
            cookie.dead_letter ? dead_letter_source(record) : DeadLetterSource{record.table, record.topic};
        records_.push_back(
            {cookie.txn, record.weight(), std::string(source.table), std::string(source.topic), cookie.dead_letter});
        replay_.add(record, cookie);
      }
      return true;
    case kafka::Sink::Produced::queue_full:
      ++context_.counters.queue_full;
      return false;
    case kafka::Sink::Produced::failed:
      break;
  }
  // Refused before it left (larger than message.max.bytes, or a transaction a failure doomed:
  // librdkafka answers _STATE until it is aborted): the verdict is about this record alone, and
  // the transaction cannot hold it: it aborts (posted, as from a report: this may run inside the
  // backlog's drain), and the record is published again with it. The checkpoint is not: the
  // commit of the transaction published again writes its own, and a refusal of it for good
  // still ends the instance (exit 24).
  kafka::Delivery refused;
  auto alone = cookie;
  alone.isolated = !cookie.is_checkpoint();
  refused.cookie = alone.pack();
  refused.error = error;
  refused.topic = record.topic;
  refused.record = record;
  note_failure(refused);
  if (!cookie.is_checkpoint()) replay_.add(record, cookie);
  later([this] { maybe_commit(true); });
  return true;
}

void ExactlyOnce::backlog_round() {
  if (closed_) return;
  producer().poll();
  if (!backlog_.drain()) {
    backlog_.arm();
    return;
  }
  if (!closed_) context_.events.changed();
}

bool ExactlyOnce::ensure_transaction() {
  if (open_) return true;
  if (closed_) return false;
  const auto begun = producer()->begin_transaction();
  if (!begun.ok()) {
    on_transaction_failure(begun, "beginning a Kafka transaction");
    return false;
  }
  open_ = true;
  started_ = context_.clock.now();
  return true;
}

// Runs inside librdkafka's delivery-report callback, where the record reported still counts as
// outstanding: a commit (which first flushes) or an abort called from here would wait for it
// until its timeout. Both are posted to the io_context instead.
void ExactlyOnce::on_delivery(const kafka::Delivery& delivery) {
  ++reported_;
  if (delivery.error) note_failure(delivery);
  if (closed_) return;
  if (failure_) {
    later([this] { maybe_commit(true); });  // aborts
    return;
  }
  if (commit_ready()) {
    later([this] {
      if (!closed_ && commit_ready()) finish_commit();
    });
  }
}

// Called at each Postgres commit (`now`: the caps are reached) and whenever the stream has
// handed over everything the server sent (`now`). Commits then (low latency at low rates), when
// the transaction has collected for kafka.transaction_interval (throughput while draining a
// backlog), or at a stop; never inside a Postgres transaction.
void ExactlyOnce::maybe_commit(bool now) {
  if (closed_) return;
  // A refusal aborts, also one reported while a commit waits for its reports: that commit
  // would never come (issue 24 item 1).
  if (failure_) {
    abort_and_end("Kafka refused a record of it");
    return;
  }
  if (committing_ || !open_ || context_.tracker.in_transaction()) return;
  const bool due = context_.clock.now() - started_ >= context_.config.kafka.transaction_interval;
  if (now || due || stopping_) {
    spdlog::debug("committing the Kafka transaction: {} record(s), {}", records_.size(),
                  now   ? "caught up or caps reached"
                  : due ? "interval"
                        : "stopping");
    start_commit();
  }
}

void ExactlyOnce::start_commit() {
  committing_ = true;
  context_.events.changed();  // the next Postgres transaction goes into the next Kafka transaction
  // The checkpoint goes last, in the same transaction: committed together with the records it
  // covers, or aborted together with them. Behind any record of the transaction that still
  // waits for room in the producer's queue: a checkpoint committed without a record it covers
  // would make the next start skip that record (issue 24 item 5).
  // It covers what is in or before this Kafka transaction: it names the newest Postgres
  // transaction, which the next session proves the history by, and covers the non-transactional
  // messages (dead-lettered) after it (docs/spec.md I11). With nothing covered yet, none is
  // written. A backfill's chunks are covered by none (SessionStart::write_checkpoints).
  const auto& covered = context_.tracker.newest_coverage();
  if (covered.empty() || !context_.start.write_checkpoints) {
    checkpoint_in_txn_ = true;
  } else if (!backlog_.send(context_.checkpointer.record(covered), DeliveryCookie::checkpoint())) {
    return;  // sent from the backlog; its report then finishes the commit
  }
  // The transaction is whole, and its commit waits for every report: its last records go now
  // instead of after linger.ms (at 1,000 one-event transactions/s, half of a commit's time).
  producer()->send_now();
  if (!closed_ && commit_ready()) finish_commit();
}

// Everything of the Kafka transaction is handed over, the checkpoint last, and reported.
bool ExactlyOnce::commit_ready() const {
  return committing_ && checkpoint_in_txn_ && backlog_.empty() && reported_ == produced_;
}

void ExactlyOnce::finish_commit() {
  if (closed_) return;
  if (failure_) {
    abort_and_end("Kafka refused a record of it");
    return;
  }
  const auto commit_started = context_.clock.now();
  const auto committed = producer()->commit_transaction(kCommitTimeout);
  spdlog::debug("commit_transaction took {} us ({} since the transaction began)",
                std::chrono::duration_cast<std::chrono::microseconds>(context_.clock.now() - commit_started).count(),
                std::chrono::duration_cast<std::chrono::microseconds>(commit_started - started_).count());
  if (committed.status == kafka::TxnStatus::retry) {
    // Kafka is slow or away: the same commit resumes; nothing is confirmed meanwhile.
    commit_pending_ = true;
    spdlog::warn("committing the Kafka transaction is taking long ({}); trying again", committed.message);
    context_.clock.after(*commit_timer_, kCommitRetry, [this] { finish_commit(); });
    return;
  }
  if (!committed.ok()) {
    on_transaction_failure(committed, "committing the Kafka transaction");
    return;
  }
  ++context_.counters.kafka_transactions;
  if (!context_.tracker.newest_coverage().empty() && context_.start.write_checkpoints)
    ++context_.counters.checkpoints_written;
  // The next transaction goes to the other producer, whose last one ended a transaction ago.
  if (producers_[1].is_open()) current_ = 1 - current_;
  open_ = false;
  committing_ = false;
  commit_pending_ = false;
  checkpoint_in_txn_ = false;
  produced_ = 0;
  reported_ = 0;
  started_ = {};  // no transaction is open (outlived_timeout())
  replayed_ = false;
  quiet_replays_ = 0;
  const auto records = std::move(records_);
  records_.clear();
  replay_.clear();
  count_published(records);
  for (const auto& r : records) context_.events.completed(r.unit, r.weight);
  context_.events.changed();
}

// A committed Kafka transaction's records, told to the counters and the metrics.
void ExactlyOnce::count_published(const std::vector<InTransaction>& records) {
  const auto now_us = wall_us();
  for (const auto& r : records) {
    if (r.dead_letter) {
      ++context_.counters.dead_lettered;
      context_.observer.event_poison(r.table, r.topic, PoisonAction::dead_lettered);
    } else {
      ++context_.counters.records_acked;
      context_.observer.event_published(r.topic, std::chrono::microseconds(std::max<std::int64_t>(
                                                     0, now_us - context_.tracker.commit_time_us(r.unit))));
    }
  }
}

// The session ends with a transaction open; nothing of it is confirmed. A commit librdkafka
// timed out is still under way, and librdkafka refuses an abort beside it: the commit is resumed
// to its verdict instead (if it commits, the checkpoint it holds skips its records when they are
// read again). A call that times out is resumed: a producer woken from a long pause (a frozen VM)
// learns that it is fenced only from the coordinator's answer, and an instance that ended its
// session without it would wait on as a silent standby instead of exiting 22. True when the
// transaction was aborted (and the producer can begin another).
bool ExactlyOnce::settle_open(int attempts) {
  if (!open_) return false;
  bool committed = false;
  bool aborted = false;
  for (int timeouts = 0;;) {
    const bool resume_commit = commit_pending_;
    const char* what = resume_commit ? "resuming the Kafka commit" : "aborting the Kafka transaction";
    const auto result =
        resume_commit ? producer()->commit_transaction(kAbortTimeout) : producer()->abort_transaction(kAbortTimeout);
    if (result.ok()) {
      committed = resume_commit;
      aborted = !resume_commit;
      break;
    }
    spdlog::warn("{}: {}", what, result.message);
    if (result.status == kafka::TxnStatus::fenced) {
      fence_seen_ = fmt::format("{}: {}", what, result.message);
      break;
    }
    if (result.status == kafka::TxnStatus::abort && resume_commit) {
      commit_pending_ = false;  // the commit failed: what is left is to abort it
      continue;
    }
    if (result.status != kafka::TxnStatus::retry || ++timeouts >= attempts) break;
  }
  open_ = false;
  commit_pending_ = false;
  if (committed) {
    // Published, though nothing of it is confirmed this session: counted, as its commit's were
    // at finish_commit (docs/spec.md I8: a dead letter is counted).
    ++context_.counters.kafka_transactions;
    count_published(records_);
  } else {
    ++context_.counters.kafka_transactions_aborted;
  }
  return aborted;
}

// Nothing of the transaction is confirmed. A record Kafka refused for good is remembered, so
// that it is sent alone and meets poison.policy after poison.max_retries refusals of its own, as
// in at-least-once; such a refusal is the record's, not the servers': the transaction is published
// again in this session (publish_again). Any other cause ends the session, and the next one
// publishes the transaction again from the slot.
void ExactlyOnce::abort_and_end(const std::string& why) {
  const bool aborted = settle_open(1);
  // The reports the abort left waiting (the refused batch's may come after purged records', or
  // after a produce() into the failed transaction answered _STATE): each is noted below.
  for (const auto& producer : producers_) producer.poll();
  std::string cause = why;
  if (failure_ && failure_->error) {
    // The refusal decides, not the first report: librdkafka may purge the transaction's queued
    // records (_PURGE_QUEUE), or refuse a produce() into it (_STATE), before the refused batch's
    // own reports.
    const auto refusal = std::find_if(failures_.begin(), failures_.end(), [](const kafka::Delivery& d) {
      return d.error && d.error->kind == kafka::DeliveryFailure::permanent;
    });
    const kafka::Delivery& decisive = refusal != failures_.end() ? *refusal : *failure_;
    const auto& error = *decisive.error;
    const auto cookie = DeliveryCookie::unpack(decisive.cookie);
    std::size_t learned = 0;  // new suspects, and refusals of a record sent alone
    for (const auto& failure : failures_) {
      const auto failed = DeliveryCookie::unpack(failure.cookie);
      if (failed.is_checkpoint() && failure.error && refused_for_good(*failure.error)) {
        context_.events.ended(checkpoint_refused(context_.config, *failure.error));
        return;
      }
      if (!failure.record || !failure.error || failed.is_checkpoint() || failed.dead_letter ||
          failure.error->kind != kafka::DeliveryFailure::permanent)
        continue;
      const auto& record = *failure.record;
      const auto [entry, added] = refused_->try_emplace(refused_key(record, failed.txn));
      auto& refused = entry->second;
      refused.error = *failure.error;
      if (!failed.isolated) {
        // Refused with its batch: maybe for another record of it. Sent alone when the transaction
        // is published again (at debug: a batch holds up to thousands, and a line names the refusal).
        if (added) ++learned;
        poison_.log(spdlog::level::debug, record, failed.txn,
                    fmt::format("Kafka refused the record's batch ({}: {}); it is sent alone when its transaction is "
                                "published again",
                                failure.error->code, failure.error->text));
        continue;
      }
      ++learned;
      ++refused.attempts;
      ++context_.counters.poison_retried;
      context_.observer.event_poison(record.table, record.topic, PoisonAction::retried);
      poison_.log(spdlog::level::warn, record, failed.txn,
                  fmt::format("Kafka refused the record ({}: {}); its transaction is aborted and published again "
                              "(attempt {} of {} before poison.policy applies)",
                              failure.error->code, failure.error->text, refused.attempts,
                              context_.config.poison.max_retries + 1));
    }
    if (decisive.record && cookie.dead_letter && error.kind == kafka::DeliveryFailure::permanent) {
      // A dead letter shares the transaction's batches: refused for its size, it may be the batch
      // that was too large, cut while the dead-letter topic's limit was only assumed (Kafka
      // down when the session read it) or before it was lowered. The limit is read again
      // (note_failure), and the next session cuts its batches under it: once per dead letter, so
      // one too large alone still stops. The simulator found exit 4 there.
      if (error.size_refusal && refused_->try_emplace(refused_key(*decisive.record, cookie.txn)).second) {
        context_.events.ended(Outcome::restart(fmt::format(
            "Kafka refused a batch of dead letters for its size ({}: {}); the limit of topic {} is read again and "
            "the transaction published again from the slot's confirmed position, its batches under it",
            error.code, error.text, decisive.record->topic)));
        return;
      }
      // The dead-letter topic refuses it too: nothing safe is left but to stop unconfirmed, as
      // at-least-once does. Retrying would abort the same transaction forever (issue 24 item 4).
      poison_.dead_letter_refused(*decisive.record, cookie.txn, error);
      return;
    }
    cause = fmt::format("{} ({}: {})", why, error.code, error.text);
    if (error.kind == kafka::DeliveryFailure::fenced) {
      context_.events.ended(fenced(error.code + ": " + error.text));
      return;
    }
    // Records failed because the producer is fenced report librdkafka's _FATAL, not the fence.
    if (auto fence = fence_shown()) {
      context_.events.ended(std::move(*fence));
      return;
    }
    if (error.kind == kafka::DeliveryFailure::permanent) {
      // Kafka refused a record, not a session: nothing is wrong with the servers (docs/spec.md
      // I13). The transaction is published again at once, in this session when the abort went
      // through and it learned something new (otherwise the same transaction would fail the same
      // way), or from the slot by the next session.
      if (aborted && learned > 0 && replay_.complete() && !producer()->fatal()) {
        quiet_replays_ = 0;
        publish_again(cause);
        return;
      }
      context_.events.ended(Outcome::restart(
          fmt::format("Kafka transaction aborted: {}; nothing of it was confirmed, and it is published again from the "
                      "slot's confirmed position",
                      cause)));
      return;
    }
  }
  // librdkafka aborts a transaction whose batch was refused without bumping the producer's epoch:
  // the partition's next batch, in the transaction published again, fails with "skipped sequence
  // numbers (OUT_OF_ORDER_SEQUENCE_NUMBER, requires epoch bump)", and the abort of that one bumps
  // it (seen on Kafka 4.4, relay_batch_refusal_test). That failure is the refusal's echo, not an
  // outage: the transaction is published again once more. A second failure in a row ends the session.
  if (aborted && replayed_ && quiet_replays_ == 0 && replay_.complete() && !producer()->fatal() &&
      !outlived_timeout()) {
    ++quiet_replays_;
    publish_again(
        fmt::format("{}, in the transaction published again after a refusal (librdkafka bumps the "
                    "producer's epoch with this abort)",
                    cause));
    return;
  }
  if (auto outlived = outlived_timeout()) cause = fmt::format("{}: {}", cause, *outlived);
  context_.events.ended(
      Outcome::reconnect(fmt::format("Kafka transaction aborted: {}; nothing of it was confirmed, and it is "
                                     "published again from the slot's confirmed position",
                                     cause)));
}

// The aborted transaction's records are handed over again, in their order and before what waited
// for room in the producer's queue, each as deliver() would hand it: a suspect alone, one
// refused too often to poison.policy (its dead letter goes inside the transaction), the others
// batched. Their units stay outstanding; the next commit acknowledges them.
void ExactlyOnce::publish_again(const std::string& cause) {
  auto entries = replay_.take();
  auto waiting = backlog_.take();
  const bool commit_due = committing_ || stopping_;
  commit_timer_->cancel();
  committing_ = false;
  checkpoint_in_txn_ = false;
  started_ = {};
  produced_ = 0;
  reported_ = 0;
  failure_.reset();
  failures_.clear();
  records_.clear();
  replayed_ = true;
  spdlog::warn(
      "Kafka transaction aborted: {}; its {} record(s) are published again in a new one, each refused record "
      "alone",
      cause, entries.size() + waiting.size());
  for (auto& entry : entries) {
    if (closed_) return;
    if (entry.cookie.dead_letter) {
      send(entry.record, entry.cookie);
    } else {
      deliver(entry.record, entry.cookie.txn);
    }
  }
  for (auto& w : waiting) {
    if (closed_) return;
    send(w.record, w.cookie);
  }
  if (closed_) return;
  if (commit_due) later([this] { maybe_commit(true); });
  context_.events.changed();
}

void ExactlyOnce::on_transaction_failure(const kafka::TxnResult& result, const char* step) {
  switch (result.status) {
    case kafka::TxnStatus::ok:
      return;
    case kafka::TxnStatus::fenced:
      open_ = false;  // a fenced producer can abort nothing
      context_.events.ended(fenced(fmt::format("{}: {}", step, result.message)));
      return;
    case kafka::TxnStatus::fatal:
      open_ = false;
      if (auto fence = fence_shown()) {
        context_.events.ended(std::move(*fence));
        return;
      }
      context_.events.ended(
          Outcome::reconnect(fmt::format("{}: the transactional producer failed ({}); rebuilding it and "
                                         "resuming from the slot's confirmed position",
                                         step, result.message)));
      return;
    case kafka::TxnStatus::retry:
    case kafka::TxnStatus::abort:
      break;
  }
  abort_and_end(fmt::format("{} failed: {}", step, result.message));
}

// The one outcome of a fence, whichever call or report shows it.
Outcome ExactlyOnce::fenced(const std::string& what) const {
  const auto& start = context_.start;
  if (start.holds_slot && start.holds_slot()) {
    return Outcome::reconnect(fmt::format(
        "the Kafka producer was fenced ({}) while this instance still holds the slot, so no other instance took "
        "over: {}; nothing of it was confirmed, and the producer is rebuilt",
        what,
        outlived_timeout().value_or("the transaction coordinator aborted a transaction that outlived "
                                    "transaction.timeout.ms (a long Kafka outage)")));
  }
  return Outcome::fatal(Fatal::fenced, fmt::format("another pgoutbox instance with transactional.id {} took over "
                                                   "({}); this one writes nothing more",
                                                   start.transactional_id, what));
}

// The transaction coordinator aborts a transaction open longer than the producer's
// transaction.timeout.ms, and the producer meets that as a fence or an abortable error. A
// Postgres transaction is never split across Kafka transactions (whole_units()), so one whose
// publishing takes longer is aborted in every session, and a backoff does not help: this names
// the cause with its figures and the fix (docs/operating.md "Transaction timeout"). Empty when
// the transaction was younger than the timeout.
std::optional<std::string> ExactlyOnce::outlived_timeout() const {
  if (started_ == Clock::time_point{}) return std::nullopt;
  const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(context_.clock.now() - started_);
  if (age < transaction_timeout_) return std::nullopt;
  return fmt::format(
      "the Kafka transaction was open for {} ms with {} record(s) handed to Kafka, longer than the producer's "
      "transaction.timeout.ms ({} ms), and the transaction coordinator aborted it. A Postgres transaction is "
      "published in one Kafka transaction: when Kafka was reachable meanwhile, this one takes longer to publish "
      "than the timeout allows, and it is aborted again in every session. Raise "
      "kafka.properties.transaction.timeout.ms (the broker accepts at most its transaction.max.timeout.ms, "
      "900000 by default; pgoutbox check compares them), or write smaller Postgres transactions",
      age.count(), produced_, transaction_timeout_.count());
}

// The producer's fatal state names a fence: whatever failure showed it first, this instance
// stops writing with the fence's code (a reconnect would wait as a standby, saying nothing).
std::optional<Outcome> ExactlyOnce::fence_shown() const {
  if (fence_seen_) return fenced(*fence_seen_);
  for (const auto& producer : producers_) {
    if (!producer.is_open()) continue;
    const auto fatal = producer->fatal();
    if (fatal && fatal->kind == kafka::SinkFatal::Kind::fenced) return fenced(fatal->text);
  }
  return std::nullopt;
}

std::pair<Lsn, std::string> ExactlyOnce::refused_key(const outbox::Record& record, ConfirmTracker::TxnId unit) const {
  return relay::refused_key(context_.tracker.commit_lsn(unit), record);
}

const RefusedRecord* ExactlyOnce::refused_before(const outbox::Record& record, ConfirmTracker::TxnId unit) const {
  if (refused_->empty()) return nullptr;
  const auto it = refused_->find(refused_key(record, unit));
  return it == refused_->end() ? nullptr : &it->second;
}

void ExactlyOnce::note_failure(const kafka::Delivery& delivery) {
  // A batch refused for its size: the topic's limit may have changed since it was read. Acted on
  // as the report is served, whatever comes of it: one served while the session closes (the
  // abort at its end) would otherwise leave the next session under the same reading, refused
  // again (the simulator found that once transaction calls took time).
  // A dead letter is marked isolated but shares the transaction's batches.
  const auto cookie = DeliveryCookie::unpack(delivery.cookie);
  if (delivery.record && delivery.error->size_refusal && (!cookie.isolated || cookie.dead_letter) &&
      context_.start.topic_limits)
    context_.start.topic_limits->forget(delivery.record->topic);
  if (!failure_) failure_ = delivery;
  if (failures_.size() < kMaxFailuresKept) failures_.push_back(delivery);
}

// A suspect goes in a batch of its own: everything before it (in the producer's queue, and
// what waits for room there) is sent and reported first, and nothing after it is queued until
// its own batch is sent, so Kafka's verdict is about it. When Kafka does not take that in time,
// the session ends instead (nothing is confirmed; the record is still a suspect next time): a
// refusal of a batch it shared would be counted against it, and an innocent record
// dead-lettered. The simulator found that case (docs/simulation.md).
void ExactlyOnce::send_alone(const outbox::Record& record, DeliveryCookie cookie) {
  const auto give_up = [this](const char* what) {
    context_.events.ended(
        Outcome::reconnect(fmt::format("exactly-once: Kafka did not take {} within {} s; the record Kafka "
                                       "refused with its batch is sent alone when its transaction is "
                                       "published again",
                                       what, kFlushTimeout.count())));
  };
  // What waits goes first, and is flushed before the record goes: a record the drain just sent
  // would otherwise share its batch. The simulator found that.
  for (;;) {
    if (!flush_unless_doomed()) return give_up("what precedes a record sent alone");
    if (closed_) return;
    if (backlog_.empty()) break;
    backlog_.drain();
    if (closed_) return;
  }
  send(record, cookie);
  if (closed_) return;
  if (!backlog_.empty() || !flush_unless_doomed()) return give_up("a record sent alone");
  // Kafka took it alone: it is no suspect, and goes batched if its transaction is published
  // again (another record's refusal aborts it).
  if (!failure_) refused_->erase(refused_key(record, cookie.txn));
}

// A transaction with a failed record is doomed: librdkafka sends none of its other records (they
// wait for the abort that purges them), so a flush then waits out its whole timeout. The flush
// goes in slices, and stops (true) once a report shows the failure: the record then goes on to
// be refused (_STATE), which keeps it for the transaction published again by the posted abort.
// A CI run met the wait after a size refusal whose abort left the producer's sequence numbers to
// bump (OUT_OF_ORDER_SEQUENCE_NUMBER in the next transaction); the simulator, once its producer
// held a doomed transaction's records as librdkafka does, found the loss of returning early.
bool ExactlyOnce::flush_unless_doomed() {
  constexpr auto kSlice = 100ms;
  for (auto waited = 0ms; waited < kFlushTimeout; waited += kSlice) {
    if (producer()->flush(kSlice)) return true;
    if (failure_ || closed_) return true;
  }
  return false;
}

}  // namespace pgoutbox::relay
