#include "at_least_once.h"

#include <boost/asio/post.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "dead_letter.h"

namespace pgoutbox::relay {

using namespace std::chrono_literals;

namespace {
// How many records one handler run sends from the retry queue or a released topic before it
// yields to the io_context, so keepalives and acks are served between rounds (docs/spec.md I6).
constexpr std::size_t kSendsPerRound = 64;
// A record's first send, through the batched sink (not a re-send alone, not a dead-letter write).
bool is_batched(DeliveryCookie cookie) { return !cookie.isolated && !cookie.dead_letter; }
}  // namespace

AtLeastOnce::AtLeastOnce(const PathContext& context)
    : context_(context),
      rules_{context.config.poison, context.config.reconnect.max, context.start.jitter_seed},
      poison_(context.config.poison, context.tracker, context.counters, context.observer, context.events),
      backlog_(
          context.clock, [this](const outbox::Record& r, DeliveryCookie c) { return try_send(r, c); },
          [this] { backlog_round(); }),
      retry_timer_(context.clock.timer()),
      pump_timer_(context.clock.timer()),
      gap_timer_(context.clock.timer()),
      refused_(context.start.refused ? context.start.refused : std::make_shared<RefusedRecords>()) {}

std::optional<Outcome> AtLeastOnce::open() {
  kafka::SinkOptions options;
  options.on_delivery = [this](const kafka::Delivery& d) { on_delivery(d); };
  options.gapless = true;
  return open_stream_sink(context_, main_, std::move(options));
}

void AtLeastOnce::started() {
  context_.checkpointer.write_periodically([this] { context_.events.changed(); });
}

void AtLeastOnce::deliver(const outbox::Record& record, ConfirmTracker::TxnId unit) {
  send(record, DeliveryCookie::batched(unit));
}

void AtLeastOnce::refuse(const outbox::Record& record, ConfirmTracker::TxnId unit, const kafka::DeliveryError& error) {
  apply_policy(record, unit, error, 0);
}

void AtLeastOnce::caught_up() {
  if (!context_.config.kafka.send_when_caught_up) return;
  // Posted: it may serve delivery reports, which is for a handler of its own, not the stream's.
  boost::asio::post(context_.io, [this, alive = std::weak_ptr<int>(alive_)] {
    if (!alive.expired() && !closed_) main_->send_now();
  });
}

void AtLeastOnce::stopping() { context_.checkpointer.stopping(); }

// A safety net beside the wake-up descriptors: serve the sinks and notice fatal errors.
void AtLeastOnce::poll() {
  main_.poll();
  isolated_.poll();
  context_.checkpointer.poll();
  check_fatal();
}

Outcome AtLeastOnce::close(Outcome outcome) {
  closed_ = true;
  for (auto* timer : {&retry_timer_, &pump_timer_, &gap_timer_}) (*timer)->cancel();
  backlog_.cancel();
  pump_armed_ = false;
  context_.checkpointer.close();
  return outcome;
}

// The producer's idempotence state was lost: nothing beyond the last fully acknowledged
// transaction is confirmed, and the session is rebuilt from the slot's confirmed position.
bool AtLeastOnce::check_fatal() {
  auto fatal = main_->fatal();
  if (fatal && fatal->kind == kafka::SinkFatal::Kind::gap) {
    if (!gap_seen_) {
      gap_seen_ = true;
      end_after_gap(fatal->text, 0);
    }
    return true;
  }
  if (!fatal && isolated_.is_open()) fatal = isolated_->fatal();
  if (!fatal) return false;
  context_.events.ended(Outcome::reconnect("the Kafka producer hit a fatal error (" + fatal->text +
                                           "); rebuilding it and resuming from the slot's confirmed position"));
  return true;
}

// The producer stopped after Kafka refused a batch for good (SinkOptions::gapless): nothing after
// that batch in its partition was written, so sending its records again alone, in their places,
// keeps every key's order (docs/spec.md I4). librdkafka reports them with the broker's error just
// after its fatal state is set: they are served first (each becomes a suspect, note_suspect).
// Then the session ends, at once: a refusal is a record's, not an outage. When no suspect was
// reported within a moment, the next session would meet the same batch: the ordinary backoff.
void AtLeastOnce::end_after_gap(const std::string& what, int polls) {
  constexpr int kPolls = 25;
  constexpr auto kPollEvery = 20ms;
  context_.clock.after(*gap_timer_, polls == 0 ? 0ms : kPollEvery, [this, what, polls] {
    if (closed_) return;
    main_.poll();
    if (closed_) return;
    if (suspects_noted_ == 0 && polls < kPolls) {
      end_after_gap(what, polls + 1);
      return;
    }
    const auto why = fmt::format(
        "Kafka refused a batch for good ({}); the producer stopped before anything after it in its partition was "
        "written, and the {} record(s) of it are sent again alone, in their places",
        what, suspects_noted_);
    context_.events.ended(suspects_noted_ > 0
                              ? Outcome::restart(why)
                              : Outcome::reconnect(why + " (none was reported: the producer is rebuilt after the "
                                                         "backoff)"));
  });
}

// A record of a batch Kafka refused for good: maybe not its own fault (a batch is refused whole).
// Remembered across sessions, so that the next session sends it alone, in its place.
void AtLeastOnce::note_suspect(const outbox::Record& record, ConfirmTracker::TxnId unit,
                               const kafka::DeliveryError& error) {
  auto& refused = (*refused_)[refused_key(context_.tracker.commit_lsn(unit), record)];
  refused.error = error;
  ++suspects_noted_;
  // One line per record at debug: a batch holds up to thousands; the session's end counts them.
  poison_.log(
      spdlog::level::debug, record, unit,
      fmt::format("Kafka refused the record's batch ({}: {}); it is sent alone, in its place", error.code, error.text));
}

const RefusedRecord* AtLeastOnce::refused_before(const outbox::Record& record, ConfirmTracker::TxnId unit) const {
  if (refused_->empty()) return nullptr;
  const auto it = refused_->find(refused_key(context_.tracker.commit_lsn(unit), record));
  return it == refused_->end() ? nullptr : &it->second;
}

// Kafka refuses a whole batch when one record in it is refused (e.g. too large), so a verdict
// about one record needs a batch of one: retries and dead-letter writes go through a second
// sink that sends every record alone. Opened at the first refusal; most sessions never need it.
kafka::Sink& AtLeastOnce::sink_for(DeliveryCookie cookie) {
  if (is_batched(cookie)) return *main_;
  if (!isolated_.is_open()) {
    kafka::SinkOptions options;
    options.isolated = true;
    options.on_delivery = [this](const kafka::Delivery& d) { on_delivery(d); };
    isolated_.open(context_.io, context_.sinks(std::move(options)));
  }
  return *isolated_;
}

void AtLeastOnce::send(const outbox::Record& record, DeliveryCookie cookie) {
  // Sends the queue could not take go first, in their order (per-key order, I4); nothing new is
  // read while the queue is full.
  if (!backlog_.send(record, cookie)) context_.events.changed();
}

// False when the sink's queue is full: the caller keeps the record and a timer tries again, so
// the io thread never blocks (keepalives, signals and acks go on meanwhile).
bool AtLeastOnce::try_send(const outbox::Record& record, DeliveryCookie cookie) {
  if (closed_) return true;  // nothing more is sent; it comes again after a restart
  if (is_batched(cookie)) {
    // Kafka refused it with its batch in an earlier session: it goes alone, in its place, after
    // what precedes it and before what follows it in its topic (held meanwhile), until
    // poison.max_retries of its own refusals.
    if (const auto* refused = refused_before(record, cookie.txn)) {
      if (refused->attempts > context_.config.poison.max_retries) {
        apply_policy(record, cookie.txn, refused->error, refused->attempts);
        return true;
      }
      topics_[record.topic].waiting.push_back(
          {record, DeliveryCookie::alone(cookie.txn, refused->attempts), context_.clock.now()});
      post_pump(record.topic);
      return true;
    }
    const auto it = topics_.find(record.topic);
    if (it != topics_.end() && it->second.held()) {  // behind a failed record of its topic (I4)
      it->second.waiting.push_back({record, cookie});
      return true;
    }
  }
  return produce_now(record, cookie);
}

bool AtLeastOnce::produce_now(const outbox::Record& record, DeliveryCookie cookie) {
  kafka::DeliveryError error;
  switch (sink_for(cookie).produce(record, cookie.pack(), error)) {
    case kafka::Sink::Produced::ok:
      if (is_batched(cookie)) ++topics_[record.topic].in_flight;
      context_.events.sent(cookie.txn);
      return true;
    case kafka::Sink::Produced::queue_full:
      ++context_.counters.queue_full;
      return false;
    case kafka::Sink::Produced::failed:
      break;
  }
  // Refused before sending (e.g. larger than message.max.bytes): the same path as a failed
  // delivery, so the same policy applies.
  on_failure(record, cookie, error, false);
  return true;
}

void AtLeastOnce::backlog_round() {
  if (closed_) return;
  main_.poll();
  isolated_.poll();
  if (!backlog_.drain()) {
    backlog_.arm();
    return;
  }
  if (closed_) return;
  for (const auto& [topic, state] : topics_) {
    if (state.held() && !state.head_busy) post_pump(topic);  // a released topic may have met the full queue
  }
  context_.events.changed();
}

void AtLeastOnce::on_delivery(const kafka::Delivery& delivery) {
  const auto cookie = DeliveryCookie::unpack(delivery.cookie);
  const std::string& topic = delivery.record ? delivery.record->topic : delivery.topic;
  if (is_batched(cookie)) {
    const auto it = topics_.find(topic);
    if (it != topics_.end() && it->second.in_flight > 0) --it->second.in_flight;
  }
  if (delivery.error) {
    if (delivery.record) on_failure(*delivery.record, cookie, *delivery.error, true);
  } else {
    if (cookie.dead_letter) {
      ++context_.counters.dead_lettered;
      const auto source = delivery.record ? dead_letter_source(*delivery.record) : DeadLetterSource{};
      context_.observer.event_poison(source.table, source.topic, PoisonAction::dead_lettered);
    } else {
      ++context_.counters.records_acked;
      const auto latency = std::max<std::int64_t>(0, wall_us() - context_.tracker.commit_time_us(cookie.txn));
      context_.observer.event_published(delivery.topic, std::chrono::microseconds(latency));
    }
    // A failed record, now acknowledged alone: innocent of its batch's refusal, it goes batched
    // again if its transaction is published again (before completed(): that may confirm it).
    const bool settled_alone = cookie.isolated && !cookie.dead_letter;
    if (settled_alone && delivery.record && !refused_->empty())
      refused_->erase(refused_key(context_.tracker.commit_lsn(cookie.txn), *delivery.record));
    context_.events.completed(cookie.txn, delivery.weight);
    if (settled_alone) settle_head(topic);
  }
  if (!is_batched(cookie) || closed_) return;
  const auto it = topics_.find(topic);
  if (it == topics_.end() || it->second.in_flight > 0) return;
  if (it->second.held()) {
    post_pump(topic);  // the last report of a held topic starts its re-sends
  } else {
    topics_.erase(it);
  }
}

void AtLeastOnce::rebuild(const kafka::DeliveryError& error) {
  context_.events.ended(Outcome::reconnect(fmt::format(
      "the Kafka producer hit error {}; rebuilding it and resuming from the slot's confirmed position", error.code)));
}

// Carries out what decide() says about a failed delivery (docs/spec.md I8). `reported`: from a
// delivery report (else refused by produce()).
void AtLeastOnce::on_failure(const outbox::Record& record, DeliveryCookie cookie, const kafka::DeliveryError& error,
                             bool reported) {
  // Noted first: these reports follow the producer's fatal state (end_after_gap). A batch refused
  // for its size: the topic's limit may have changed since it was read, and the next record for
  // it, in this session or the next, reads it again (relay.cpp).
  if (reported && is_batched(cookie) && error.kind == kafka::DeliveryFailure::permanent)
    note_suspect(record, cookie.txn, error);
  if (error.size_refusal && is_batched(cookie) && context_.start.topic_limits)
    context_.start.topic_limits->forget(record.topic);
  if (closed_) return;  // nothing more is sent; it stays unconfirmed and comes again after a restart
  if (check_fatal()) return;
  if (is_batched(cookie)) {
    hold(record, cookie, error, reported);
    return;
  }
  const auto action = decide(error.kind, cookie, rules_);
  switch (action.kind) {
    case Action::Kind::rebuild:
      rebuild(error);
      return;
    case Action::Kind::send_alone:
    case Action::Kind::retry_after:
      // A failed record sent alone stays its topic's head meanwhile (or a dead-letter write is
      // sent again).
      if (error.kind == kafka::DeliveryFailure::retriable) {
        poison_.log(spdlog::level::warn, record, cookie.txn,
                    fmt::format("delivery failed ({}: {}); sending it again", error.code, error.text));
      } else {
        ++context_.counters.poison_retried;
        context_.observer.event_poison(record.table, record.topic, PoisonAction::retried);
        poison_.log(spdlog::level::warn, record, cookie.txn,
                    fmt::format("Kafka refused the record ({}: {}); retry {} of {} in {} ms", error.code, error.text,
                                action.next.attempt, context_.config.poison.max_retries, action.delay.count()));
      }
      schedule_retry(record, action.next, action.delay);
      return;
    case Action::Kind::stop:
      if (cookie.dead_letter) {
        poison_.dead_letter_refused(record, cookie.txn, error);
        return;
      }
      break;
    case Action::Kind::dead_letter:
    case Action::Kind::skip:
      break;
  }
  apply_policy(record, cookie.txn, error, cookie.attempt + 1);
  // Skipped, or on its way to the dead-letter topic: it will never reach its own topic, so the
  // records behind it may go (stop ends the session instead).
  if (!cookie.dead_letter) settle_head(record.topic);
}

void AtLeastOnce::apply_policy(const outbox::Record& record, ConfirmTracker::TxnId unit,
                               const kafka::DeliveryError& error, std::uint32_t attempts) {
  // Kafka refused it alone as often as poison.max_retries allows: if its transaction is
  // published again (a later session), the policy applies at once (try_send).
  if (attempts > context_.config.poison.max_retries) {
    auto& refused = (*refused_)[refused_key(context_.tracker.commit_lsn(unit), record)];
    refused.error = error;
    refused.attempts = attempts;
  }
  if (auto dead_letter = poison_.apply(record, unit, error, attempts))
    send(*dead_letter, DeliveryCookie::dead_letter_write(unit));
}

// A record's first send failed: its topic is held (see TopicState), and the record waits there
// to be sent again alone, in its place.
void AtLeastOnce::hold(const outbox::Record& record, DeliveryCookie cookie, const kafka::DeliveryError& error,
                       bool reported) {
  const auto action = decide(error.kind, cookie, rules_);
  if (action.kind == Action::Kind::rebuild) {
    rebuild(error);
    return;
  }
  if (error.kind == kafka::DeliveryFailure::retriable) {
    poison_.log(
        spdlog::level::warn, record, cookie.txn,
        fmt::format("delivery failed ({}: {}); sending it again after the records before it", error.code, error.text));
  }
  Pending failed{record, DeliveryCookie::alone(cookie.txn, 0), context_.clock.now() + action.delay};
  auto& state = topics_[record.topic];
  // A report comes after every earlier report of its partition, and before anything held was
  // sent; a refusal by produce() is the newest record of its topic that left the hold.
  if (reported) {
    state.failed.push_back(std::move(failed));
  } else {
    state.waiting.push_front(std::move(failed));
  }
  post_pump(record.topic);
}

void AtLeastOnce::settle_head(const std::string& topic) {
  const auto it = topics_.find(topic);
  if (it == topics_.end()) return;
  it->second.head_busy = false;
  if (!closed_) post_pump(topic);
}

// pump() runs from the io_context, never inside a delivery report or a send: a chain of
// refusals cannot recurse, and keepalives are served between rounds.
void AtLeastOnce::post_pump(const std::string& topic) {
  to_pump_.insert(topic);
  if (pump_armed_) return;
  pump_armed_ = true;
  context_.clock.after(*pump_timer_, 0ms, [this] {
    pump_armed_ = false;
    if (closed_) return;
    const auto topics = std::move(to_pump_);
    to_pump_.clear();
    for (const auto& held : topics) pump(held);
  });
}

// Moves a held topic on: the failed records first, alone, once every earlier send of the topic
// has reported; then the later ones, batched, in their order; the topic is released when empty.
void AtLeastOnce::pump(const std::string& topic) {
  const auto it = topics_.find(topic);
  if (it == topics_.end()) return;
  auto& state = it->second;
  std::size_t sent = 0;
  while (!closed_ && !state.head_busy) {
    auto& queue = state.failed.empty() ? state.waiting : state.failed;
    if (queue.empty()) break;
    if (queue.front().cookie.isolated) {
      if (state.in_flight > 0) return;  // an earlier record of the topic may still land or fail
      auto head = std::move(queue.front());
      queue.pop_front();
      state.head_busy = true;
      const auto delay = std::chrono::duration_cast<std::chrono::milliseconds>(head.due - context_.clock.now());
      schedule_retry(head.record, head.cookie, std::max(delay, std::chrono::milliseconds(0)));
      return;
    }
    if (sent == kSendsPerRound) {
      post_pump(topic);
      return;
    }
    auto next = std::move(queue.front());
    queue.pop_front();
    if (!produce_now(next.record, next.cookie)) {
      state.waiting.push_front(std::move(next));
      if (backlog_.empty()) backlog_.arm();
      return;
    }
    ++sent;
  }
  if (!state.held() && state.in_flight == 0) topics_.erase(it);
}

void AtLeastOnce::schedule_retry(const outbox::Record& record, DeliveryCookie cookie, std::chrono::milliseconds delay) {
  retries_.emplace(context_.clock.now() + delay, Pending{record, cookie});
  arm_retry();
}

void AtLeastOnce::arm_retry() {
  if (retries_.empty()) return;
  retry_timer_->at(retries_.begin()->first, [this] {
    if (closed_) return;
    const auto now = context_.clock.now();
    for (std::size_t sent = 0; sent < kSendsPerRound && !retries_.empty() && retries_.begin()->first <= now; ++sent) {
      auto node = retries_.extract(retries_.begin());
      send(node.mapped().record, node.mapped().cookie);
      if (closed_) return;
    }
    arm_retry();
  });
}

}  // namespace pgoutbox::relay
