// The relay's Kafka side: the sinks, sending (with the queue-full pause), delivery reports and
// what follows a failed delivery (decide(), poison.h). The stream side is relay.cpp.
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "dead_letter.h"
#include "pgoutbox/logging/logging.h"
#include "pgoutbox/relay/relay.h"

namespace pgoutbox::relay {

using namespace std::chrono_literals;

namespace {
// How soon a send the sink had no room for is tried again; the sink is served meanwhile.
constexpr auto kQueueFullRetry = 20ms;
// How many records one handler run sends from the retry queue or a released topic before it
// yields to the io_context, so keepalives and acks are served between rounds (docs/spec.md I6).
constexpr std::size_t kSendsPerRound = 64;
// A record's first send, through the batched sink (not a re-send alone, not a dead-letter write).
bool is_batched(DeliveryCookie cookie) { return !cookie.isolated && !cookie.dead_letter; }
}  // namespace

// A safety net beside the wake-up descriptors: serve the sinks and notice fatal errors.
void Relay::arm_poll() {
  clock_.after(*poll_timer_, 200ms, [this] {
    if (outcome_) return;
    for (auto* slot : {&main_, &isolated_, &checkpoint_sink_}) {
      if (slot->sink) slot->sink->poll();
    }
    check_sink_fatal();
    arm_poll();
  });
}

// The producer's idempotence state was lost: nothing beyond the last fully acknowledged
// transaction is confirmed, and the session is rebuilt from the slot's confirmed position.
bool Relay::check_sink_fatal() {
  auto fatal = main_.sink->fatal();
  if (!fatal && isolated_.sink) fatal = isolated_.sink->fatal();
  if (!fatal) return false;
  if (eos_ && fatal->kind == kafka::SinkFatal::Kind::fenced) {
    finish(fenced(fatal->text));
    return true;
  }
  finish(Outcome::reconnect("the Kafka producer hit a fatal error (" + fatal->text +
                            "); rebuilding it and resuming from the slot's confirmed position"));
  return true;
}

void Relay::open_sink(SinkSlot& slot, bool isolated) {
  kafka::SinkOptions options;
  options.isolated = isolated;
  if (eos_ && !isolated) options.transactional_id = start_.transactional_id;
  options.on_delivery = [this](const kafka::Delivery& d) { on_delivery(d); };
  if (!isolated) {
    options.on_statistics = [this](std::string_view json) { observer_.kafka_statistics(json); };
    options.on_brokers_up = [this](bool up) {
      // The client reconnects by itself and keeps every record queued meanwhile (I1); this only
      // tells the operator when the state changes.
      if (kafka_up_ != up && up && kafka_up_)
        spdlog::info("kafka: a broker is reachable again; queued records are being delivered");
      kafka_up_ = up;
      observer_.kafka_up(up);
    };
  }
  slot.sink = sinks_(std::move(options));
  slot.wakeup.emplace(io_, ::dup(slot.sink->wakeup_fd()));
  wait_wakeup(slot);
}

void Relay::wait_wakeup(SinkSlot& slot) {
  slot.wakeup->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                          [this, &slot](const boost::system::error_code& ec) {
                            if (ec) return;
                            slot.sink->drain_wakeup();
                            slot.sink->poll();
                            wait_wakeup(slot);
                          });
}

// Kafka refuses a whole batch when one record in it is refused (e.g. too large), so a verdict
// about one record needs a batch of one: retries and dead-letter writes go through a second
// sink that sends every record alone. Opened at the first refusal; most sessions never need it.
kafka::Sink& Relay::sink_for(DeliveryCookie cookie) {
  // Exactly-once: everything goes in the one transaction (a refusal aborts it instead).
  if (eos_ || (!cookie.isolated && !cookie.dead_letter)) return *main_.sink;
  if (!isolated_.sink) open_sink(isolated_, true);
  return *isolated_.sink;
}

void Relay::send(const outbox::Record& record, DeliveryCookie cookie) {
  // Sends the queue could not take go first, in their order (per-key order, I4).
  if (blocked_.empty() && try_send(record, cookie)) return;
  blocked_.push_back({record, cookie});
  if (blocked_.size() == 1) arm_queue_full();
  apply_backpressure();  // nothing new is read while the queue is full
}

// False when the sink's queue is full: the caller keeps the record and a timer tries again, so
// the io thread never blocks (keepalives, signals and acks go on meanwhile).
bool Relay::try_send(const outbox::Record& record, DeliveryCookie cookie) {
  if (is_batched(cookie)) {
    const auto it = topics_.find(record.topic);
    if (it != topics_.end() && it->second.held()) {  // behind a failed record of its topic (I4)
      it->second.waiting.push_back({record, cookie});
      return true;
    }
  }
  return produce_now(record, cookie);
}

bool Relay::produce_now(const outbox::Record& record, DeliveryCookie cookie) {
  if (eos_ && !ensure_kafka_transaction()) return true;  // the session is ending
  kafka::DeliveryError error;
  switch (sink_for(cookie).produce(record, cookie.pack(), error)) {
    case kafka::Sink::Produced::ok:
      if (eos_) {
        ++kafka_txn_produced_;
        if (cookie.is_checkpoint()) checkpoint_in_txn_ = true;
        if (!cookie.is_checkpoint()) {
          const auto source =
              cookie.dead_letter ? dead_letter_source(record) : DeadLetterSource{record.table, record.topic};
          kafka_txn_records_.push_back(
              {cookie.txn, record.weight(), std::string(source.table), std::string(source.topic), cookie.dead_letter});
        }
      } else if (is_batched(cookie)) {
        ++topics_[record.topic].in_flight;
      }
      return true;
    case kafka::Sink::Produced::queue_full:
      ++counters_.queue_full;
      return false;
    case kafka::Sink::Produced::failed:
      break;
  }
  // Refused before sending (e.g. larger than message.max.bytes): the same path as a failed
  // delivery, so the same policy applies.
  if (eos_) {
    kafka::Delivery refused;
    refused.cookie = cookie.pack();
    refused.error = error;
    refused.topic = record.topic;
    refused.record = record;
    // Refused before it left: the verdict is about this record alone.
    auto alone = cookie;
    alone.isolated = true;
    refused.cookie = alone.pack();
    note_transaction_failure(refused);
    maybe_commit(true);  // aborts: the transaction cannot hold what Kafka refuses
    return true;
  }
  on_failure(record, cookie, error, false);
  return true;
}

// The dead-letter topic refuses a dead-letter write too: nothing safe is left but to stop
// without confirming it (either delivery mode).
void Relay::stop_on_refused_dead_letter(const outbox::Record& record, ConfirmTracker::TxnId txn,
                                        const kafka::DeliveryError& error) {
  log_event(
      spdlog::level::err, record, txn,
      fmt::format("the dead-letter topic {} refused a poison record: {} ({})", record.topic, error.text, error.code));
  const auto source = dead_letter_source(record);
  observer_.event_poison(source.table, source.topic, PoisonAction::stopped);
  finish(Outcome::fatal(Fatal::poison, fmt::format("cannot dead-letter event {} to {}: {} ({})", record.event_id,
                                                   record.topic, error.text, error.code)));
}

void Relay::arm_queue_full() {
  clock_.after(*queue_full_timer_, kQueueFullRetry, [this] {
    if (closing_) return;
    for (auto* slot : {&main_, &isolated_}) {
      if (slot->sink) slot->sink->poll();
    }
    while (!blocked_.empty() && !closing_) {
      const auto next = blocked_.front();
      if (!try_send(next.record, next.cookie)) {
        arm_queue_full();
        return;
      }
      blocked_.pop_front();
    }
    if (closing_) return;
    for (const auto& [topic, state] : topics_) {
      if (state.held() && !state.head_busy) post_pump(topic);  // a released topic may have met the full queue
    }
    apply_backpressure();
  });
}

void Relay::on_delivery(const kafka::Delivery& delivery) {
  if (eos_) {
    on_transactional_delivery(delivery);
    return;
  }
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
      ++counters_.dead_lettered;
      const auto source = delivery.record ? dead_letter_source(*delivery.record) : DeadLetterSource{};
      observer_.event_poison(source.table, source.topic, PoisonAction::dead_lettered);
    } else {
      ++counters_.records_acked;
      const auto now_us =
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      const auto latency = std::max<std::int64_t>(0, now_us - tracker_.commit_time_us(cookie.txn));
      observer_.event_published(delivery.topic, std::chrono::microseconds(latency));
    }
    complete(cookie.txn, delivery.weight);
    if (cookie.isolated && !cookie.dead_letter) settle_head(topic);  // a failed record, now acknowledged
  }
  if (!is_batched(cookie) || closing_) return;
  const auto it = topics_.find(topic);
  if (it == topics_.end() || it->second.in_flight > 0) return;
  if (it->second.held()) {
    post_pump(topic);  // the last report of a held topic starts its re-sends
  } else {
    topics_.erase(it);
  }
}

// Carries out what decide() says about a failed delivery (docs/spec.md I8). `reported`: from a
// delivery report (else refused by produce()).
void Relay::on_failure(const outbox::Record& record, DeliveryCookie cookie, const kafka::DeliveryError& error,
                       bool reported) {
  if (closing_) return;  // nothing more is sent; it stays unconfirmed and comes again after a restart
  if (check_sink_fatal()) return;
  if (is_batched(cookie)) {
    hold(record, cookie, error, reported);
    return;
  }
  const auto action = decide(error.kind, cookie, rules_);
  switch (action.kind) {
    case Action::Kind::rebuild:
      finish(
          Outcome::reconnect(fmt::format("the Kafka producer hit error {}; rebuilding it and resuming from the "
                                         "slot's confirmed position",
                                         error.code)));
      return;
    case Action::Kind::send_alone:
    case Action::Kind::retry_after:
      // A failed record sent alone stays its topic's head meanwhile (or a dead-letter write is
      // sent again).
      if (error.kind == kafka::DeliveryFailure::retriable) {
        log_event(spdlog::level::warn, record, cookie.txn,
                  fmt::format("delivery failed ({}: {}); sending it again", error.code, error.text));
      } else {
        ++counters_.poison_retried;
        observer_.event_poison(record.table, record.topic, PoisonAction::retried);
        log_event(spdlog::level::warn, record, cookie.txn,
                  fmt::format("Kafka refused the record ({}: {}); retry {} of {} in {} ms", error.code, error.text,
                              action.next.attempt, config_.poison.max_retries, action.delay.count()));
      }
      schedule_retry(record, action.next, action.delay);
      return;
    case Action::Kind::stop:
      if (cookie.dead_letter) {
        stop_on_refused_dead_letter(record, cookie.txn, error);
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

// A record's first send failed: its topic is held (see TopicState), and the record waits there
// to be sent again alone, in its place.
void Relay::hold(const outbox::Record& record, DeliveryCookie cookie, const kafka::DeliveryError& error,
                 bool reported) {
  const auto action = decide(error.kind, cookie, rules_);
  if (action.kind == Action::Kind::rebuild) {
    finish(
        Outcome::reconnect(fmt::format("the Kafka producer hit error {}; rebuilding it and resuming from the "
                                       "slot's confirmed position",
                                       error.code)));
    return;
  }
  if (error.kind == kafka::DeliveryFailure::retriable) {
    log_event(
        spdlog::level::warn, record, cookie.txn,
        fmt::format("delivery failed ({}: {}); sending it again after the records before it", error.code, error.text));
  }
  Pending failed{record, DeliveryCookie::alone(cookie.txn, 0), clock_.now() + action.delay};
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

void Relay::settle_head(const std::string& topic) {
  const auto it = topics_.find(topic);
  if (it == topics_.end()) return;
  it->second.head_busy = false;
  if (!closing_) post_pump(topic);
}

// pump() runs from the io_context, never inside a delivery report or a send: a chain of
// refusals cannot recurse, and keepalives are served between rounds.
void Relay::post_pump(const std::string& topic) {
  to_pump_.insert(topic);
  if (pump_armed_) return;
  pump_armed_ = true;
  clock_.after(*pump_timer_, 0ms, [this] {
    pump_armed_ = false;
    if (closing_) return;
    const auto topics = std::move(to_pump_);
    to_pump_.clear();
    for (const auto& held : topics) pump(held);
  });
}

// Moves a held topic on: the failed records first, alone, once every earlier send of the topic
// has reported; then the later ones, batched, in their order; the topic is released when empty.
void Relay::pump(const std::string& topic) {
  const auto it = topics_.find(topic);
  if (it == topics_.end()) return;
  auto& state = it->second;
  std::size_t sent = 0;
  while (!closing_ && !state.head_busy) {
    auto& queue = state.failed.empty() ? state.waiting : state.failed;
    if (queue.empty()) break;
    if (queue.front().cookie.isolated) {
      if (state.in_flight > 0) return;  // an earlier record of the topic may still land or fail
      auto head = std::move(queue.front());
      queue.pop_front();
      state.head_busy = true;
      const auto delay = std::chrono::duration_cast<std::chrono::milliseconds>(head.due - clock_.now());
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
      if (blocked_.empty()) arm_queue_full();
      return;
    }
    ++sent;
  }
  if (!state.held() && state.in_flight == 0) topics_.erase(it);
}

void Relay::apply_policy(const outbox::Record& record, ConfirmTracker::TxnId txn, const kafka::DeliveryError& error,
                         std::uint32_t attempts) {
  const auto& code = error.code;
  const auto& reason = error.text;
  switch (policy_action(config_.poison.policy)) {
    case Action::Kind::skip:
      log_event(
          spdlog::level::warn, record, txn,
          fmt::format("poison record ({}: {}) after {} attempt(s); policy skip: dropped", code, reason, attempts));
      ++counters_.skipped;
      observer_.event_poison(record.table, record.topic, PoisonAction::skipped);
      complete(txn, record.weight());
      return;
    case Action::Kind::dead_letter: {
      log_event(spdlog::level::warn, record, txn,
                fmt::format("poison record ({}: {}) after {} attempt(s); sending it to {}", code, reason, attempts,
                            config_.poison.dead_letter_topic));
      const auto dlq =
          dead_letter_record(record, config_.poison.dead_letter_topic,
                             DeadLetterCause{reason, code, attempts, tracker_.commit_lsn(txn), error.size_refusal});
      // Its ack releases the dead-letter record's weight: count the original's as that, so the
      // in-flight bytes come back to what they were (a size refusal's copy has no value).
      in_flight_bytes_ -=
          std::min<std::uint64_t>(in_flight_bytes_, record.weight() - std::min(record.weight(), dlq.weight()));
      send(dlq, DeliveryCookie::dead_letter_write(txn));
      return;
    }
    default:
      break;
  }
  log_event(spdlog::level::err, record, txn,
            fmt::format("poison record ({}: {}) after {} attempt(s); policy stop: exiting without confirming it", code,
                        reason, attempts));
  observer_.event_poison(record.table, record.topic, PoisonAction::stopped);
  finish(
      Outcome::fatal(Fatal::poison, fmt::format("poison record, event id {}, topic {}: {} ({}). Fix the cause, or set "
                                                "poison.policy: dead-letter, and restart: it is read again",
                                                record.event_id.empty() ? "(none)" : record.event_id,
                                                record.topic.empty() ? "(none)" : record.topic, reason, code)));
}

void Relay::schedule_retry(const outbox::Record& record, DeliveryCookie cookie, std::chrono::milliseconds delay) {
  retries_.emplace(clock_.now() + delay, Pending{record, cookie});
  arm_retry();
}

void Relay::arm_retry() {
  if (retries_.empty()) return;
  retry_timer_->at(retries_.begin()->first, [this] {
    if (closing_) return;
    const auto now = clock_.now();
    for (std::size_t sent = 0; sent < kSendsPerRound && !retries_.empty() && retries_.begin()->first <= now; ++sent) {
      auto node = retries_.extract(retries_.begin());
      send(node.mapped().record, node.mapped().cookie);
      if (closing_) return;
    }
    arm_retry();
  });
}

void Relay::log_event(spdlog::level::level_enum level, const outbox::Record& record, ConfirmTracker::TxnId txn,
                      const std::string& message) const {
  std::string_view trace_id;
  for (const auto& h : record.headers) {
    if (h.name == "traceparent") trace_id = logging::trace_id_from_traceparent(h.value);
  }
  logging::event(level,
                 logging::EventFields{record.event_id, record.key ? std::string_view(*record.key) : std::string_view(),
                                      record.topic, trace_id, tracker_.commit_lsn(txn)},
                 message);
}

}  // namespace pgoutbox::relay
