#pragma once

// The relay's fakes for tests without services: pgoutput messages built from the wire layouts
// (the decoder tests' MessageBuilder) go in through a fake change source, records come out in a
// fake Kafka sink whose verdicts (and, for exactly-once, transaction results) each case scripts.

#include <sys/eventfd.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <boost/asio/post.hpp>
#include <deque>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>
#include "../pgoutput/message_builder.h"
#include "../support/virtual_clock.h"

#include "pgoutbox/relay/delivery_cookie.h"
#include "pgoutbox/relay/relay.h"

namespace pgoutbox::relay::testing {

using namespace std::chrono_literals;
using pgoutput::testing::Bytes;
using pgoutput::testing::MessageBuilder;

inline constexpr std::uint32_t kRelid = 16384;
inline constexpr std::uint32_t kUuid = 2950, kText = 25, kJsonb = 3802;

inline Bytes relation() {
  MessageBuilder m('R');
  m.int32(kRelid).string("public").string("outbox").int8('d').int16(5);
  m.relation_column(1, "id", kUuid, -1).relation_column(0, "aggregatetype", kText, -1);
  m.relation_column(0, "aggregateid", kText, -1).relation_column(0, "type", kText, -1);
  m.relation_column(0, "payload", kJsonb, -1);
  return m;
}
inline Bytes begin(std::uint64_t final_lsn, std::uint32_t xid, std::int64_t commit_time = 0) {
  return MessageBuilder('B').int64(final_lsn).int64(static_cast<std::uint64_t>(commit_time)).int32(xid);
}
inline Bytes commit(std::uint64_t commit_lsn, std::uint64_t end_lsn, std::int64_t commit_time = 0) {
  return MessageBuilder('C').int8(0).int64(commit_lsn).int64(end_lsn).int64(static_cast<std::uint64_t>(commit_time));
}
inline Bytes insert(int n, std::string_view key = "k", std::string_view payload = "{}", std::string_view type = "E") {
  const std::string id = fmt::format("00000000-0000-0000-0000-{:012d}", n);
  MessageBuilder m('I');
  m.int32(kRelid).int8('N').int16(5);
  m.text_column(id).text_column(type).text_column(key).text_column("Created").text_column(payload);
  return m;
}

// A replication stream that hands over queued messages while not paused.
class FakeSource final : public ChangeSource {
 public:
  explicit FakeSource(boost::asio::io_context& io) : io_(io) {}
  void push(Bytes message, Lsn wal_end = {}) {
    history_.push_back({message, wal_end, false});
    queue_.push_back({std::move(message), wal_end, false});
  }
  // A new session streams again from the highest flush the server holds, as Postgres does: the
  // Relation messages first (pgoutput sends one before a relation's first change of a session),
  // then everything after the last commit at or below that position.
  void rewind() {
    std::size_t from = 0;
    for (std::size_t i = 0; i < history_.size(); ++i) {
      if (!history_[i].keepalive && history_[i].wal_end != Lsn{} && history_[i].wal_end <= flush) from = i + 1;
    }
    queue_.clear();
    for (std::size_t i = 0; i < from; ++i) {
      if (!history_[i].bytes.empty() && history_[i].bytes[0] == std::byte{'R'}) queue_.push_back(history_[i]);
    }
    queue_.insert(queue_.end(), history_.begin() + static_cast<std::ptrdiff_t>(from), history_.end());
    handler_ = nullptr;
    paused_ = false;
    stopped_ = false;
  }
  void keepalive(Lsn wal_end) { queue_.push_back({{}, wal_end, true}); }
  void pump() {
    while (handler_ != nullptr && !paused_ && !stopped_ && !queue_.empty()) {
      auto next = std::move(queue_.front());
      queue_.pop_front();
      if (next.wal_end > received_) received_ = next.wal_end;
      if (next.keepalive) {
        handler_->on_keepalive(replication::Keepalive{next.wal_end, 0, false});
      } else {
        handler_->on_data(replication::XLogData{next.wal_end, next.wal_end, 0, next.bytes});
      }
    }
  }
  void start(ChangeHandler& handler, std::function<void(Outcome)> on_end) override {
    handler_ = &handler;
    on_end_ = std::move(on_end);
    boost::asio::post(io_, [this] { pump(); });
  }
  void set_flush(Lsn lsn) override {
    flushes.push_back(lsn);
    if (lsn > flush) flush = lsn;
  }
  void pause() override {
    paused_ = true;
    ++pauses;
  }
  void resume() override {
    paused_ = false;
    boost::asio::post(io_, [this] { pump(); });
  }
  bool paused() const override { return paused_; }
  Lsn received() const override { return received_; }
  void stop() override {
    stopped_ = true;
    boost::asio::post(io_, [this] { on_end_(Outcome::stopped()); });
  }
  // The server closed the replication connection (a terminated walsender, a restart).
  void lose_connection() {
    stopped_ = true;
    boost::asio::post(io_, [this] { on_end_(Outcome::reconnect("the replication connection was lost")); });
  }
  bool drained() const { return queue_.empty(); }
  // What the real stream says when the socket holds nothing more after handing data over.
  void caught_up() {
    if (handler_ != nullptr && !stopped_) handler_->on_caught_up();
  }
  // A keepalive that comes while the relay is busy: like the real source, it is answered from
  // the io_context whether the stream is paused or not. `then` runs after it was handled.
  void keepalive_soon(Lsn wal_end, std::function<void()> then) {
    boost::asio::post(io_, [this, wal_end, then = std::move(then)] {
      if (handler_ == nullptr || stopped_) return;
      handler_->on_keepalive(replication::Keepalive{wal_end, 0, false});
      then();
    });
  }

  std::vector<Lsn> flushes;  // every set_flush, in order
  Lsn flush;                 // what the server would hold: the highest
  int pauses = 0;

 private:
  Lsn received_;
  struct Item {
    Bytes bytes;
    Lsn wal_end;
    bool keepalive;
  };
  boost::asio::io_context& io_;
  std::deque<Item> queue_;
  std::vector<Item> history_;  // everything pushed, for rewind()
  ChangeHandler* handler_ = nullptr;
  std::function<void(Outcome)> on_end_;
  bool paused_ = false;
  bool stopped_ = false;
};

struct Produced {
  outbox::Record record;
  DeliveryCookie cookie;
  bool isolated;
};

// What both fake sinks (batched and isolated) share: what was produced, and the script.
struct SinkScript {
  // The verdict on a produced record: nullopt delivers it.
  std::function<std::optional<kafka::DeliveryError>(const Produced&)> verdict = [](const Produced&) {
    return std::optional<kafka::DeliveryError>();
  };
  int queue_full = 0;        // so many produce() calls find the queue full
  std::size_t capacity = 0;  // >0: produce() finds the queue full while so many reports are unsent
  std::size_t unsent = 0;    // produced, report not yet delivered
  // produce() finds the queue full for these records (while it returns true).
  std::function<bool(const outbox::Record&)> full_for = [](const outbox::Record&) { return false; };
  int sends_now = 0;           // send_now() calls (the stream was caught up)
  int flushes = 0;             // flush() calls
  bool hold = false;           // keep deliveries until release()
  bool hold_isolated = false;  // keep only the isolated sink's deliveries until release()
  // Called at each produce() that is accepted, after it is recorded.
  std::function<void(const Produced&)> on_produce = [](const Produced&) {};
  // produce() refuses these records at once (as librdkafka does one above message.max.bytes).
  std::function<bool(const outbox::Record&)> refuse = [](const outbox::Record&) { return false; };
  std::function<void(const outbox::Record&, bool isolated)> on_refuse = [](const outbox::Record&, bool) {};
  // Records acknowledged, in the order their acknowledgements were written: what a consumer of
  // the topic would read.
  std::vector<outbox::Record> landed;
  std::optional<kafka::SinkFatal> fatal;
  // Exactly-once (a sink opened with a transactional id): every call, in order ("init",
  // "begin", "commit", "abort"); what each commit answers; what is in the open transaction and
  // what was committed, which is what a read_committed consumer reads.
  std::vector<std::string> txn_calls;
  std::vector<std::string> commit_ids;  // the transactional id of each commit, in order
  int txn_calls_inside_a_report = 0;
  std::function<kafka::TxnResult()> commit_result = [] { return kafka::TxnResult{}; };
  kafka::TxnResult init_result;
  std::function<kafka::TxnResult()> abort_result = [] { return kafka::TxnResult{}; };
  // librdkafka aborts a transaction with a refused batch without bumping the producer's epoch: in
  // the next transaction the partition's batch fails with OUT_OF_ORDER_SEQUENCE_NUMBER (requires
  // epoch bump), until that one is aborted too (seen on Kafka 4.4).
  bool refusal_echo = false;
  // librdkafka refuses produce() into a transaction a failed record doomed (_STATE) until it is
  // aborted; the failure dooms it when Kafka answers, before its report is served.
  bool doomed_state = false;
  std::vector<outbox::Record> open_txn;
  std::vector<outbox::Record> committed;
  std::vector<Produced> produced;
  std::vector<std::function<void()>> held;
  int unserved = 0;  // reports delivered to a sink that its poll() has not served yet
  int sinks_opened = 0;
  std::vector<bool> released;
  // Delivers the i-th held record's report (once).
  void release(std::size_t i) {
    released.resize(held.size());
    if (i < held.size() && !released[i]) {
      released[i] = true;
      held[i]();
    }
  }
  void release_all() {
    for (std::size_t i = 0; i < held.size(); ++i) release(i);
  }
};

class FakeSink final : public kafka::Sink {
 public:
  FakeSink(SinkScript& script, kafka::SinkOptions options)
      : script_(script), options_(std::move(options)), fd_(::eventfd(0, EFD_NONBLOCK)) {}
  ~FakeSink() override {
    script_.unserved -= static_cast<int>(ready_.size());
    ::close(fd_);
  }
  Produced produce(const outbox::Record& record, std::uint64_t cookie, kafka::DeliveryError& error) override {
    if (gap_) {
      error = {kafka::DeliveryFailure::fatal, "_FATAL", "Local: Fatal error", false};
      return Produced::failed;
    }
    if (doomed_) {
      error = {kafka::DeliveryFailure::retriable, "_STATE", "Local: Erroneous state", false};
      return Produced::failed;
    }
    if (script_.refuse(record)) {
      script_.on_refuse(record, options_.isolated);
      error = {kafka::DeliveryFailure::permanent, "MSG_SIZE_TOO_LARGE", "Local: Message size too large", true};
      return Produced::failed;
    }
    if (script_.queue_full > 0) {
      --script_.queue_full;
      return Produced::queue_full;
    }
    if (script_.capacity > 0 && script_.unsent >= script_.capacity) return Produced::queue_full;
    if (script_.full_for(record)) return Produced::queue_full;
    ++script_.unsent;
    const testing::Produced p{record, DeliveryCookie::unpack(cookie), options_.isolated};
    script_.produced.push_back(p);
    if (!options_.transactional_id.empty()) script_.open_txn.push_back(record);
    kafka::Delivery d;
    d.cookie = cookie;
    d.topic = record.topic;
    d.weight = record.weight();
    d.error = script_.verdict(p);
    if (!d.error && echo_) {
      d.error = kafka::DeliveryError{kafka::DeliveryFailure::fatal, "OUT_OF_ORDER_SEQUENCE_NUMBER",
                                     "Broker: Broker received an out of order sequence number", false};
    }
    if (d.error && d.error->kind == kafka::DeliveryFailure::permanent) refused_in_txn_ = true;
    if (d.error && script_.doomed_state && !options_.transactional_id.empty()) doomed_ = true;
    if (d.error) d.record = record;
    auto deliver = [this, d, record]() mutable {
      --script_.unsent;
      // A gapless producer (SinkOptions::gapless) stops at a batch refused for good: the batch's
      // records report the broker's error (a verdict gives each of them one), what else it still
      // held is purged, never written (librdkafka sets its fatal state first).
      // The stop takes effect when the reports are next served: what was produced until then
      // was in flight with the refused batch.
      const bool refused = d.error && d.error->kind == kafka::DeliveryFailure::permanent;
      if (options_.gapless && gap_pending_ && !refused) {
        d.error =
            kafka::DeliveryError{kafka::DeliveryFailure::retriable, "_PURGE_QUEUE", "Local: Purged in queue", false};
        d.record = record;
      } else if (options_.gapless && refused && !gap_pending_) {
        gap_pending_ =
            kafka::SinkFatal{kafka::SinkFatal::Kind::gap, "_GAPLESS_GUARANTEE: the producer stopped at a gap"};
      }
      if (!d.error) script_.landed.push_back(record);
      ready_.push_back(d);
      ++script_.unserved;
      const std::uint64_t one = 1;
      EXPECT_EQ(::write(fd_, &one, sizeof one), 8);
    };
    script_.on_produce(p);
    if (script_.hold || (script_.hold_isolated && options_.isolated)) {
      script_.held.push_back(deliver);
    } else {
      deliver();
    }
    return Produced::ok;
  }
  void poll() override {
    if (gap_pending_) gap_ = gap_pending_;
    while (!ready_.empty()) {
      const auto d = ready_.front();
      ready_.pop_front();
      --script_.unserved;
      in_report_ = true;
      options_.on_delivery(d);
      in_report_ = false;
    }
  }
  void send_now() override { ++script_.sends_now; }
  bool flush(std::chrono::milliseconds) override {
    ++script_.flushes;
    poll();
    return true;
  }
  int wakeup_fd() const override { return fd_; }
  void drain_wakeup() override {
    std::uint64_t n = 0;
    while (::read(fd_, &n, sizeof n) > 0) {}
  }
  std::optional<kafka::SinkFatal> fatal() const override { return script_.fatal ? script_.fatal : gap_; }
  kafka::TxnResult init_transactions(std::chrono::milliseconds) override {
    script_.txn_calls.emplace_back("init");
    return script_.init_result;
  }
  kafka::TxnResult begin_transaction() override {
    script_.txn_calls.emplace_back("begin");
    return {};
  }
  kafka::TxnResult commit_transaction(std::chrono::milliseconds) override {
    // librdkafka counts the record being reported as outstanding until its callback returns:
    // a commit from inside it would wait for it until the timeout.
    if (in_report_) ++script_.txn_calls_inside_a_report;
    script_.txn_calls.emplace_back("commit");
    script_.commit_ids.push_back(options_.transactional_id);
    poll();  // librdkafka serves the last reports inside the commit
    auto result = script_.commit_result();
    if (result.ok()) {
      script_.committed.insert(script_.committed.end(), script_.open_txn.begin(), script_.open_txn.end());
      script_.open_txn.clear();
      refused_in_txn_ = false;
    }
    return result;
  }
  kafka::TxnResult abort_transaction(std::chrono::milliseconds) override {
    if (in_report_) ++script_.txn_calls_inside_a_report;
    script_.txn_calls.emplace_back("abort");
    script_.open_txn.clear();
    auto result = script_.abort_result();
    script_.release_all();  // the transaction's reports, held back, come now (purged or answered)
    poll();                 // librdkafka serves the purged records' reports inside the abort
    if (result.ok()) {
      doomed_ = false;
      echo_ = script_.refusal_echo && refused_in_txn_;
      refused_in_txn_ = false;
    }
    return result;
  }

 private:
  SinkScript& script_;
  kafka::SinkOptions options_;
  bool in_report_ = false;
  int fd_;
  std::deque<kafka::Delivery> ready_;
  std::optional<kafka::SinkFatal> gap_pending_;  // a gapless sink's batch was refused
  std::optional<kafka::SinkFatal> gap_;          // ... and the producer has stopped
  bool refused_in_txn_ = false;                  // a record of the open transaction was refused for good
  bool echo_ = false;                            // SinkScript::refusal_echo: this transaction fails
  bool doomed_ = false;                          // SinkScript::doomed_state: produce() answers _STATE
};

// A deployment's checkpoint signing key (docs/spec.md I11), for the configurations tests build.
inline constexpr std::string_view kTestSigningKey = "0123456789abcdef0123456789abcdef-test-key";

inline config::Config test_config() {
  config::Config c;
  config::TableConfig t;
  t.name = "outbox";
  c.tables = {t};
  c.shutdown_timeout = 300ms;
  c.poison.retry_backoff = 1ms;
  c.reconnect.max = 4ms;
  c.poison.dead_letter_topic = "dlq";
  c.checkpoint.signing_key = std::string(kTestSigningKey);
  return c;
}

// One relay session on the test's thread, on virtual time (nothing sleeps: time jumps to the
// next timer whenever nothing is ready); `steps` run one per (virtual) millisecond while it
// streams, then, once everything pushed is read and every report served, the relay is stopped
// (unless stop_when_done is false: the relay must end the session itself); time_limit (3 s of
// virtual time) stops it whatever happens. A session that ends asking for a new one at once
// (Outcome::at_once) is followed by one streaming again from the confirmed position with the same
// memories, as the daemon's loop does (app/run_command.cpp), up to at_once_restarts times; the
// steps go on there, and the outcome and counters are the last session's (`sessions` counts them).
struct Harness {
  explicit Harness(config::Config c = test_config()) : config(std::move(c)) {}

  Outcome run(std::vector<std::function<void()>> steps = {}, Lsn slot_confirmed = Lsn{0x100}) {
    sessions = 0;
    std::size_t next = 0;  // the steps go on in the next session
    for (;;) {
      ++sessions;
      auto outcome = run_session(steps, next, std::max(slot_confirmed, source.flush));
      if (!outcome.at_once || sessions > at_once_restarts) return outcome;
      // The session's producers are gone, and with them the reports they still held.
      script.held.clear();
      script.released.clear();
      script.unsent = 0;
      source.rewind();
    }
  }

  Outcome run_session(const std::vector<std::function<void()>>& steps, std::size_t& next, Lsn slot_confirmed) {
    Observer no_observer;
    Observer& heard = observer != nullptr ? *observer : no_observer;
    Relay relay(
        config, io, clock,
        [this](kafka::SinkOptions o) {
          ++script.sinks_opened;
          return std::make_unique<FakeSink>(script, std::move(o));
        },
        heard);
    relay_ = &relay;
    const auto tick = clock.timer();
    const auto deadline = clock.now() + time_limit;
    std::function<void()> arm = [&] {
      clock.after(*tick, 1ms, [&] {
        if (clock.now() > deadline) {
          timed_out = true;
          relay.stop();
          return;
        }
        if (next < steps.size()) {
          steps[next++]();
        } else if (source.drained() && script.unserved == 0 && stop_when_done) {
          // Not while reports wait to be served: on a loaded machine this tick can come before
          // the relay's poll, and a stop then would overtake what the reports decide.
          relay.stop();
          return;
        }
        arm();
      });
    };
    arm();
    SessionStart start;
    start.slot_confirmed = slot_confirmed;
    start.identity = {"7000000000000000001", "shop", "pgoutbox"};
    start.timeline = 1;
    start.server_position = Lsn{0xFFFFFF};
    if (config.delivery == config::Delivery::exactly_once) start.transactional_id = "pgoutbox-test";
    start.read_checkpoints = checkpoints;
    start.refused = refused;
    start.refused_checkpoints = refused_checkpoints;
    start.topic_limits = topic_limits;
    start.batch_size = batch_size;
    start.write_checkpoints = write_checkpoints;
    const auto outcome = relay.run(source, std::move(start));
    counters = relay.counters();
    relay_ = nullptr;
    return outcome;
  }
  // One transaction of `n` inserts, committing at `end`.
  void txn(std::uint64_t end, int n, int first = 1, std::string_view payload = "{}") {
    source.push(begin(end - 8, static_cast<std::uint32_t>(end)));
    for (int i = 0; i < n; ++i) source.push(insert(first + i, "k", payload));
    source.push(commit(end - 8, end), Lsn{end});
  }
  Relay& relay() { return *relay_; }

  config::Config config;
  boost::asio::io_context io;
  test::VirtualClock clock;
  FakeSource source{io};
  SinkScript script;
  Counters counters;
  bool timed_out = false;
  bool stop_when_done = true;
  std::chrono::milliseconds time_limit = 3s;  // then the relay is stopped and timed_out set
  int at_once_restarts = 5;                   // sessions that may follow an at-once ending (run())
  int sessions = 0;                           // the last run()'s
  // What the checkpoint topic holds at start; empty: no checkpoint this session.
  std::function<kafka::CheckpointScan()> checkpoints;
  std::shared_ptr<RefusedRecords> refused = std::make_shared<RefusedRecords>();
  // Checkpoints found written over another WAL history: kept across runs, as by one process.
  std::shared_ptr<RefusedCheckpoints> refused_checkpoints = std::make_shared<RefusedCheckpoints>();
  Observer* observer = nullptr;  // hears the relay when set
  // The destination topics' limits and the producers' batch.size (SessionStart); none by default.
  std::shared_ptr<kafka::TopicLimits> topic_limits;
  std::size_t batch_size = 0;
  bool write_checkpoints = true;  // SessionStart::write_checkpoints (false: a backfill's relay)

 private:
  Relay* relay_ = nullptr;
};

inline kafka::DeliveryError refused_for_size() {
  return {kafka::DeliveryFailure::permanent, "MSG_SIZE_TOO_LARGE", "Broker: Message size too large", true};
}

}  // namespace pgoutbox::relay::testing
