#include "sim_kafka.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "pgoutbox/kafka/producer.h"
#include "pgoutbox/kafka/record_size.h"

namespace pgoutbox::sim {

using namespace std::chrono_literals;

namespace {

// Kafka's and librdkafka's answers are given as librdkafka gives them, codes and flags; what they
// mean to the relay is the daemon's own mapping (kafka/producer.h), not the simulator's.
kafka::DeliveryError error_of(rd_kafka_resp_err_t code) { return kafka::delivery_error(code, "simulated"); }

kafka::TxnResult txn_error(rd_kafka_resp_err_t code, bool fatal, bool retriable, bool abortable, const char* text) {
  return kafka::txn_result(kafka::TxnError{.code = code,
                                           .fatal = fatal,
                                           .retriable = retriable,
                                           .txn_requires_abort = abortable,
                                           .text = fmt::format("simulated: {}", text)});
}
// The code librdkafka names so (rd_kafka_err2name).
rd_kafka_resp_err_t code_named(std::string_view name) {
  const rd_kafka_err_desc* descs = nullptr;
  std::size_t count = 0;
  rd_kafka_get_err_descs(&descs, &count);
  for (std::size_t i = 0; i < count; ++i) {
    if (descs[i].name != nullptr && name == rd_kafka_err2name(descs[i].code)) return descs[i].code;
  }
  return RD_KAFKA_RESP_ERR_UNKNOWN;
}
// The coordinator cannot be reached in time: librdkafka's retriable timeout.
kafka::TxnResult unreachable() {
  return txn_error(RD_KAFKA_RESP_ERR__TIMED_OUT, false, true, false, "coordinator unreachable");
}
// A newer producer of the transactional id was initialised: librdkafka's fatal fence.
kafka::TxnResult fenced_answer() {
  return txn_error(RD_KAFKA_RESP_ERR__FENCED, true, false, false, "fenced by a newer producer");
}

// One producer: what librdkafka's does as far as the relay can tell. Records go out in produce
// order; a record that fails with a retriable error fails every later queued record of its topic
// too (the idempotent producer keeps a partition's order). The records produced to a topic at
// one moment (linger.ms) are cut into batches of at most batch.size bytes, a record larger than
// that in a batch of its own (an isolated producer's batches hold one record); the broker takes
// or refuses a batch whole: too large for its topic's max.message.bytes, or holding a record a
// broker policy refuses.
class SimSink final : public kafka::Sink {
 public:
  SimSink(SimKafka& kafka, kafka::SinkOptions options, std::size_t batch_size)
      : kafka_(kafka),
        options_(std::move(options)),
        batch_size_(batch_size),
        fd_(::eventfd(0, EFD_NONBLOCK)),
        alive_(std::make_shared<bool>(true)) {}
  ~SimSink() override {
    *alive_ = false;
    // Its relay never learned that this transaction committed (the process went first).
    if (committed_unanswered_ != 0) kafka_.commit_never_learned(committed_unanswered_);
    // A producer that goes away (a killed process, or a session's end) may have written a
    // prefix of what it still held (batches the broker takes); a transactional one left it in
    // its open transaction.
    std::uniform_int_distribution<std::size_t> pick(0, queue_.size());
    const auto written = pick(kafka_.rng());
    if (!kafka_.down() && !fenced_ && !fatal_ && !doomed()) {
      for (std::size_t i = 0; i < written; ++i) {
        if (!queue_[i].accepted) {
          BatchSize size;
          if (verdict(i, size)) {
            if (options_.gapless) break;  // nothing after a refused batch is written
            continue;
          }
        }
        kafka_.write(queue_[i].record, txn_);
      }
    }
    ::close(fd_);
  }
  SimSink(const SimSink&) = delete;
  SimSink& operator=(const SimSink&) = delete;

  Produced produce(const outbox::Record& record, std::uint64_t cookie, kafka::DeliveryError& error) override {
    if (!fatal_ && kafka_.fatal_due()) break_idempotence();
    if (fatal_ || fenced_) {
      error = error_of(RD_KAFKA_RESP_ERR__FATAL);
      return Produced::failed;
    }
    // librdkafka refuses a record into a transaction a failure has doomed, until it is aborted.
    if (txn_failed_) {
      error = error_of(RD_KAFKA_RESP_ERR__STATE);
      return Produced::failed;
    }
    if (queue_.size() + ready_.size() >= kafka_.faults().queue_capacity) return queue_full();
    const auto now = kafka_.clock().now();
    const auto bytes = SimKafka::record_bytes(record);
    // librdkafka's limit in bytes (queue.buffering.max.kbytes): a large record waits for room
    // that a smaller one produced after it may find (the schedules keep every record within it).
    if (const auto limit = kafka_.faults().queue_bytes; limit > 0 && held_bytes_ + bytes > limit) return queue_full();
    held_bytes_ += bytes;
    if (kafka_.watch.produced) kafka_.watch.produced(record, bytes);
    const auto reading = kafka_.watch.reading ? kafka_.watch.reading(record.topic) : 0;
    const auto batch = batch_for(record.topic, bytes, now);
    queue_.push_back({record, cookie, now, batch, bytes, reading, false});
    spdlog::trace("sim kafka: produce {} to {} ({} bytes, txn {}, batch {})", record.event_id, record.topic, bytes,
                  txn_, batch);
    schedule();
    return Produced::ok;
  }
  void poll() override {
    while (!ready_.empty()) {
      const auto r = std::move(ready_.front());
      ready_.pop_front();
      held_bytes_ -= r.bytes;
      if (kafka_.watch.event) kafka_.watch.event(SinkEvent::report_served);
      if (r.size_refusal_reading && kafka_.watch.size_refusal_reported)
        kafka_.watch.size_refusal_reported(*r.size_refusal_reading);
      if (r.delivery.error && r.delivery.topic == kafka_.faults().checkpoint_topic &&
          r.delivery.error->code == "TOPIC_AUTHORIZATION_FAILED")
        kafka_.checkpoint_refusal_served();
      options_.on_delivery(r.delivery);
    }
  }
  bool flush(std::chrono::milliseconds timeout) override {
    if (!wait_for_brokers(timeout)) return false;
    while (!queue_.empty() && !doomed()) advance();
    poll();
    if (queue_.empty()) return true;
    // What a doomed transaction still holds waits for the abort: the flush waits out its timeout.
    kafka_.clock().block(timeout, [] { return false; });
    return false;
  }
  int wakeup_fd() const override { return fd_; }
  void drain_wakeup() override {
    std::uint64_t n = 0;
    while (::read(fd_, &n, sizeof n) > 0) {}
  }
  std::optional<kafka::SinkFatal> fatal() const override {
    if (fenced_) return kafka::sink_fatal(RD_KAFKA_RESP_ERR__FENCED, "simulated");
    return fatal_;
  }

  kafka::TxnResult init_transactions(std::chrono::milliseconds timeout) override {
    if (!wait_for_brokers(timeout)) return unreachable();
    round_trip();
    epoch_ = kafka_.bump_epoch(options_.transactional_id);
    return {};
  }
  kafka::TxnResult begin_transaction() override {
    if (stale()) return fenced_answer();
    txn_ = kafka_.begin_txn(options_.transactional_id, epoch_);
    txn_failed_ = false;
    return {};
  }
  kafka::TxnResult commit_transaction(std::chrono::milliseconds timeout) override {
    if (kafka_.watch.event) kafka_.watch.event(SinkEvent::commit_started);
    if (stale()) return fenced_answer();
    if (fatal_) return txn_error(fatal_code_, true, false, false, "the producer's idempotence state broke");
    if (!wait_for_brokers(timeout)) {
      commit_pending_ = true;  // librdkafka expects this commit resumed, and refuses an abort beside it
      return unreachable();
    }
    commit_pending_ = false;
    if (committed_unanswered_ != 0) {
      // The commit the last call timed out on had reached the coordinator: resumed, it succeeds.
      committed_unanswered_ = 0;
      return {};
    }
    round_trip();
    while (!queue_.empty() && !doomed()) advance();
    poll();  // librdkafka serves the last reports inside the commit
    if (stale()) return fenced_answer();
    // librdkafka's abortable error, with the failed record's code.
    if (txn_failed_) return txn_error(txn_failure_, false, false, true, "a record of the transaction failed");
    if (std::bernoulli_distribution(kafka_.faults().commit_aborts)(kafka_.rng())) {
      // The coordinator aborted it (its epoch bumped after a timeout, or a state it refuses).
      const auto code = std::bernoulli_distribution(0.5)(kafka_.rng()) ? RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH
                                                                       : RD_KAFKA_RESP_ERR_INVALID_TXN_STATE;
      return txn_error(code, false, false, true, "the coordinator aborted the transaction");
    }
    kafka_.end_txn(txn_, true);
    const auto committed = txn_;
    txn_ = 0;
    // A commit that succeeded while the call timed out (the coordinator's answer was late).
    if (kafka_.faults().commit_aborts > 0 && std::bernoulli_distribution(0.2)(kafka_.rng()) && kafka_.late_commit()) {
      commit_pending_ = true;
      committed_unanswered_ = committed;
      kafka_.clock().block(timeout, [] { return false; });  // the call waits out its timeout
      return unreachable();
    }
    return {};
  }
  kafka::TxnResult abort_transaction(std::chrono::milliseconds timeout) override {
    if (stale()) return fenced_answer();
    if (commit_pending_)
      return txn_error(RD_KAFKA_RESP_ERR__CONFLICT, false, true, false, "a commit_transaction call is under way");
    if (!wait_for_brokers(timeout)) return unreachable();
    round_trip();
    while (!queue_.empty()) fail_front(error_of(RD_KAFKA_RESP_ERR__PURGE_QUEUE), false);
    notify();
    kafka_.end_txn(txn_, false);
    txn_ = 0;
    txn_failed_ = false;
    return {};
  }

 private:
  // A call that needs the brokers blocks the relay's thread until they are back or `timeout`
  // passed (librdkafka's transactional calls and flush); true when they are back.
  bool wait_for_brokers(std::chrono::milliseconds timeout) {
    return !kafka_.down() || kafka_.clock().block(timeout, [this] { return !kafka_.down(); });
  }
  // A round trip to the transaction coordinator, during which the call blocks.
  void round_trip() {
    const auto rtt = std::chrono::microseconds(std::uniform_int_distribution<int>(500, 20'000)(kafka_.rng()));
    kafka_.clock().block(rtt, [] { return false; });
  }
  Produced queue_full() {
    if (kafka_.watch.event) kafka_.watch.event(SinkEvent::queue_full);
    return Produced::queue_full;
  }
  struct Queued {
    outbox::Record record;
    std::uint64_t cookie;
    Time produced;
    std::uint64_t batch;
    std::size_t bytes;      // what it adds to its batch
    std::uint64_t reading;  // the relay's reading of its topic's limit when it was produced
    bool accepted;          // its batch was taken (the rest of it is written in turn)
  };
  struct Ready {
    kafka::Delivery delivery;
    // A record of a batch of several refused for its size: the reading of the limit it was sent
    // under (the relay learns of the refusal when it is served).
    std::optional<std::uint64_t> size_refusal_reading;
    std::size_t bytes = 0;  // what it held of the producer's queue until it is served
  };
  struct OpenBatch {
    std::uint64_t id = 0;
    Time at{};
    std::size_t bytes = 0;
  };
  struct BatchSize {
    std::size_t bytes = SimKafka::kBatchHeader;
    std::size_t records = 0;
  };

  // The batch a record produced now to `topic` goes into: the topic's open one while it was
  // opened at this moment and the record fits within batch.size, else a new one.
  std::uint64_t batch_for(const std::string& topic, std::size_t bytes, Time now) {
    if (options_.isolated) return ++batch_;  // batch.num.messages=1
    auto& open = open_[topic];
    if (open.id != 0 && open.at == now && open.bytes + bytes <= batch_size_) {
      open.bytes += bytes;
      return open.id;
    }
    open = OpenBatch{++batch_, now, SimKafka::kBatchHeader + bytes};
    return open.id;
  }
  // The broker's verdict on the batch of queue_[first] (its first record still queued): a
  // refusal, or nullopt. Its records were produced at one moment, so they all come before the
  // first record produced later.
  std::optional<kafka::DeliveryError> verdict(std::size_t first, BatchSize& size) const {
    const auto& head = queue_[first];
    std::optional<kafka::DeliveryError> policy;
    for (std::size_t i = first; i < queue_.size() && queue_[i].produced == head.produced; ++i) {
      if (queue_[i].batch != head.batch) continue;
      size.bytes += queue_[i].bytes;
      ++size.records;
      if (!policy) policy = kafka_.policy_refusal(queue_[i].record);
    }
    if (size.bytes > kafka_.limit(head.record.topic)) {
      return error_of(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
    }
    return policy;
  }

  bool transactional() const { return !options_.transactional_id.empty(); }
  // A record of the open transaction failed: librdkafka's transaction is in its abortable state,
  // in which it sends none of the records it still holds (rd_kafka_txn_may_send_msg); they wait
  // for abort_transaction, which purges them.
  bool doomed() const { return transactional() && txn_failed_; }
  // A newer producer of the same transactional id was initialised: this one is fenced.
  bool stale() {
    if (!transactional() || fenced_) return fenced_;
    kafka_.expire(options_.transactional_id);
    if (epoch_ != kafka_.epoch(options_.transactional_id)) fenced_ = true;
    return fenced_;
  }
  void break_idempotence() {
    fatal_code_ = RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
    fatal_ = kafka::sink_fatal(fatal_code_, "simulated");
    while (!queue_.empty()) fail_front(error_of(RD_KAFKA_RESP_ERR__FATAL), false);
    notify();
  }
  void schedule() {
    if (scheduled_ || queue_.empty() || doomed()) return;
    scheduled_ = true;
    const auto latency = std::chrono::microseconds(std::uniform_int_distribution<int>(200, 4000)(kafka_.rng()));
    kafka_.clock().schedule_world(kafka_.up_again() + latency, [alive = alive_, this] {
      if (!*alive) return;
      scheduled_ = false;
      advance();
      schedule();
    });
  }
  void report(kafka::Delivery d, std::size_t bytes, std::optional<std::uint64_t> size_refusal_reading = std::nullopt) {
    if (d.error && transactional() && !txn_failed_) {
      txn_failed_ = true;
      txn_failure_ = code_named(d.error->code);
    }
    ready_.push_back({std::move(d), size_refusal_reading, bytes});
  }
  void notify() {
    if (ready_.empty()) return;
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(fd_, &one, sizeof one);
  }
  void fail_front(const kafka::DeliveryError& error, bool written) { fail(queue_.begin(), error, written); }
  std::deque<Queued>::iterator fail(std::deque<Queued>::iterator at, const kafka::DeliveryError& error, bool written,
                                    std::optional<std::uint64_t> size_refusal_reading = std::nullopt) {
    auto q = std::move(*at);
    const auto next = queue_.erase(at);
    spdlog::trace("sim kafka: {} of {} failed: {}", q.record.event_id, q.record.topic, error.code);
    if (written) kafka_.write(q.record, txn_);
    kafka::Delivery d;
    d.cookie = q.cookie;
    d.topic = q.record.topic;
    d.weight = q.record.weight();
    d.error = error;
    d.record = std::move(q.record);
    report(std::move(d), q.bytes, size_refusal_reading);
    return next;
  }
  // Kafka refuses the front record's batch whole: each of its records reports the error, in
  // their order; records of other batches stay queued.
  void refuse_front_batch(const kafka::DeliveryError& refused, const BatchSize& size) {
    const auto batch = queue_.front().batch;
    const auto produced = queue_.front().produced;
    const auto topic = queue_.front().record.topic;
    const auto reading = queue_.front().reading;
    if (refused.size_refusal && kafka_.watch.size_refused) {
      kafka_.watch.size_refused(
          SizeRefusal{topic, size.bytes, size.records, kafka_.limit(topic), options_.isolated, reading});
    }
    spdlog::trace("sim kafka: batch {} of {} ({} record(s), {} bytes) refused: {}", batch, topic, size.records,
                  size.bytes, refused.code);
    // A gapless producer (SinkOptions::gapless) stops at a batch refused for good; its fatal
    // state is set before the batch's records report the broker's error.
    if (options_.gapless) {
      fatal_code_ = RD_KAFKA_RESP_ERR__GAPLESS_GUARANTEE;
      fatal_ = kafka::sink_fatal(fatal_code_, "simulated");
    }
    std::optional<std::uint64_t> told;
    if (refused.size_refusal && !options_.isolated && size.records > 1) told = reading;
    for (auto it = queue_.begin(); it != queue_.end() && it->produced == produced;) {
      if (it->batch != batch) {
        ++it;
        continue;
      }
      if (refused.size_refusal || !kafka_.policy_refusal(it->record))
        kafka_.refused_with_batch.insert(it->record.event_id);
      it = fail(it, refused, false, told);
    }
    if (open_[topic].id == batch) open_[topic].id = 0;
  }
  // Moves the queue on: during an outage only timeouts; else writes (or refuses) what is queued.
  void advance() {
    // pgoutbox sets message.timeout.ms=0: during an outage records wait, and librdkafka sends
    // them (again) when a broker is back; the idempotent producer's sequence numbers make the
    // broker drop a retry of a write whose acknowledgement was lost.
    if (kafka_.down()) return;
    if (stale()) {
      while (!queue_.empty()) fail_front(error_of(RD_KAFKA_RESP_ERR__FATAL), false);
      notify();
      return;
    }
    std::size_t n = std::min<std::size_t>(queue_.size(), 256);
    while (n-- > 0 && !queue_.empty() && !doomed()) {
      if (!queue_.front().accepted) {
        BatchSize size;
        if (const auto refused = verdict(0, size)) {
          refuse_front_batch(*refused, size);
          if (fatal_) {
            // Nothing after the refused batch is written: what the producer still holds is purged.
            while (!queue_.empty()) fail_front(error_of(RD_KAFKA_RESP_ERR__PURGE_QUEUE), false);
            break;
          }
          continue;
        }
        // Taken: the batch is sealed, and its records are written in turn.
        const auto batch = queue_.front().batch;
        const auto produced = queue_.front().produced;
        for (auto it = queue_.begin(); it != queue_.end() && it->produced == produced; ++it) {
          if (it->batch == batch) it->accepted = true;
        }
        auto& open = open_[queue_.front().record.topic];
        if (open.id == batch) open.id = 0;
      }
      // Without it, librdkafka bumps the epoch after a refused batch and writes the later ones
      // (what this loop does when it goes on), unless they belong to a transaction, now doomed.
      auto q = std::move(queue_.front());
      queue_.pop_front();
      kafka_.write(q.record, txn_);
      kafka::Delivery d;
      d.cookie = q.cookie;
      d.topic = q.record.topic;
      d.weight = q.record.weight();
      if (options_.isolated) d.record = std::move(q.record);
      report(std::move(d), q.bytes);
    }
    notify();
  }

  SimKafka& kafka_;
  kafka::SinkOptions options_;
  std::size_t batch_size_;  // librdkafka's batch.size
  int fd_;
  std::shared_ptr<bool> alive_;  // the clock's callbacks outlive the sink
  std::deque<Queued> queue_;
  std::deque<Ready> ready_;
  std::size_t held_bytes_ = 0;             // of the records produced and not yet served
  std::map<std::string, OpenBatch> open_;  // by topic
  bool scheduled_ = false;
  std::uint64_t batch_ = 0;
  std::uint32_t epoch_ = 0;
  std::uint64_t txn_ = 0;
  bool txn_failed_ = false;
  std::uint64_t committed_unanswered_ = 0;  // a transaction committed, its call answered with a timeout
  bool fenced_ = false;
  bool commit_pending_ = false;  // a commit answered "retry": only the commit may be called next
  std::optional<kafka::SinkFatal> fatal_;
  rd_kafka_resp_err_t fatal_code_ = RD_KAFKA_RESP_ERR_NO_ERROR;
  rd_kafka_resp_err_t txn_failure_ = RD_KAFKA_RESP_ERR_NO_ERROR;  // the first failed record's, in the open transaction
};

std::string visible_key(const std::string& topic, const std::string& event_id) { return topic + '\0' + event_id; }

}  // namespace

kafka::SinkFactory SimKafka::factory(std::size_t batch_size) {
  return [this, batch_size](kafka::SinkOptions options) -> std::unique_ptr<kafka::Sink> {
    return std::make_unique<SimSink>(*this, std::move(options), batch_size);
  };
}

std::size_t SimKafka::limit(const std::string& topic) const {
  const auto it = limits_.find(topic);
  return it == limits_.end() ? kafka::kKafkaDefaultMaxMessageBytes : it->second;
}

std::size_t SimKafka::record_bytes(const outbox::Record& record) {
  return kafka::batch_bytes(record, "none") - kBatchHeader;
}

bool SimKafka::down() const {
  const auto now = clock_.now();
  return std::any_of(faults_.outages.begin(), faults_.outages.end(),
                     [&](const auto& o) { return o.first <= now && now < o.second; });
}

Time SimKafka::up_again() const {
  auto when = clock_.now();
  for (bool moved = true; moved;) {  // outages may overlap
    moved = false;
    for (const auto& [from, to] : faults_.outages) {
      if (from <= when && when < to) {
        when = to;
        moved = true;
      }
    }
  }
  return when;
}

std::optional<kafka::DeliveryError> SimKafka::policy_refusal(const outbox::Record& record) const {
  if (faults_.checkpoint_refuses && record.topic == faults_.checkpoint_topic)
    return error_of(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
  const bool refused = record.topic == faults_.dead_letter_topic ? faults_.dead_letter_refuses
                                                                 : record.value.find("POISON") != std::string::npos;
  if (!refused) return std::nullopt;
  return error_of(RD_KAFKA_RESP_ERR_POLICY_VIOLATION);
}

bool SimKafka::fatal_due() {
  if (fatal_fired_ || clock_.now() < faults_.idempotence_fatal) return false;
  fatal_fired_ = true;
  return true;
}

void SimKafka::count_visible(const Entry& entry, int delta) {
  visible_[visible_key(entry.record.topic, entry.record.event_id)] += delta;
}

void SimKafka::write(const outbox::Record& record, std::uint64_t txn) {
  spdlog::trace("sim kafka: write {} to {} (txn {})", record.event_id, record.topic, txn);
  auto& log = logs_[record.topic];
  log.push_back({record, txn});
  if (txn == 0) {
    count_visible(log.back(), 1);
  } else {
    txns_[txn - 1].entries.emplace_back(record.topic, log.size() - 1);
  }
}

std::uint64_t SimKafka::begin_txn(const std::string& transactional_id, std::uint32_t /*epoch*/) {
  txns_.push_back({transactional_id, TxnState::open, {}, clock_.now()});
  open_txns_[transactional_id] = txns_.size();
  return txns_.size();
}

void SimKafka::expire(const std::string& transactional_id) {
  const auto it = open_txns_.find(transactional_id);
  if (it == open_txns_.end()) return;
  const auto& txn = txns_[it->second - 1];
  if (txn.state != TxnState::open || clock_.now() - txn.began < faults_.transaction_timeout) return;
  spdlog::trace("sim kafka: the coordinator aborts txn {} of {}, open longer than transaction.timeout.ms", it->second,
                transactional_id);
  ++coordinator_aborts_;
  bump_epoch(transactional_id);
}

void SimKafka::end_txn(std::uint64_t txn, bool commit) {
  if (txn == 0) return;
  auto& t = txns_[txn - 1];
  if (t.state != TxnState::open) return;
  spdlog::trace("sim kafka: txn {} {}", txn, commit ? "committed" : "aborted");
  t.state = commit ? TxnState::committed : TxnState::aborted;
  if (const auto open = open_txns_.find(t.transactional_id); open != open_txns_.end() && open->second == txn)
    open_txns_.erase(open);
  if (!commit) return;
  for (const auto& [topic, index] : t.entries) count_visible(logs_[topic][index], 1);
  if (!on_commit) return;
  std::vector<const outbox::Record*> records;
  records.reserve(t.entries.size());
  for (const auto& [topic, index] : t.entries) records.push_back(&logs_[topic][index].record);
  on_commit(records);
}

std::uint32_t SimKafka::bump_epoch(const std::string& transactional_id) {
  for (std::size_t i = 0; i < txns_.size(); ++i) {
    if (txns_[i].transactional_id == transactional_id && txns_[i].state == TxnState::open) end_txn(i + 1, false);
  }
  return ++epochs_[transactional_id];
}

std::uint32_t SimKafka::epoch(const std::string& transactional_id) const {
  const auto it = epochs_.find(transactional_id);
  return it == epochs_.end() ? 0 : it->second;
}

std::vector<const outbox::Record*> SimKafka::visible(const std::string& topic) const {
  std::vector<const outbox::Record*> out;
  const auto it = logs_.find(topic);
  if (it == logs_.end()) return out;
  for (const auto& e : it->second) {
    if (e.txn == 0 || txns_[e.txn - 1].state == TxnState::committed) out.push_back(&e.record);
  }
  return out;
}

int SimKafka::visible_copies(const std::string& topic, const std::string& event_id) const {
  const auto it = visible_.find(visible_key(topic, event_id));
  return it == visible_.end() ? 0 : it->second;
}

kafka::CheckpointScan SimKafka::read_checkpoints(const std::string& topic, const kafka::SlotIdentity& identity,
                                                 const std::string& transactional_id,
                                                 const kafka::CheckpointKey* key) const {
  if (down()) throw std::runtime_error("simulated: Kafka unreachable while reading the checkpoint");
  kafka::CheckpointScan scan;
  std::int64_t offset = 0;
  for (const auto* record : visible(topic)) {
    std::optional<std::string_view> value;
    if (!record->tombstone) value = record->value;
    kafka::scan_record(scan, identity, transactional_id, key, record->key.value_or(""), value, 0, offset++);
  }
  return scan;
}

std::set<std::string> SimKafka::never_learned(const std::string& topic) const {
  std::set<std::string> out;
  const auto it = logs_.find(topic);
  if (it == logs_.end()) return out;
  for (const auto& entry : it->second) {
    if (entry.txn != 0 && unlearned_txns_.contains(entry.txn)) out.insert(entry.record.event_id);
  }
  return out;
}

std::set<std::string> SimKafka::topics() const {
  std::set<std::string> out;
  for (const auto& [topic, log] : logs_) out.insert(topic);
  return out;
}

}  // namespace pgoutbox::sim
