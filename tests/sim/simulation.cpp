#include "simulation.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "../relay/relay_fakes.h"
#include "pgoutbox/kafka/producer.h"
#include "pgoutbox/relay/relay.h"
#include "pgoutbox/relay/session.h"
#include "sim_kafka.h"
#include "sim_postgres.h"

namespace pgoutbox::sim {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

namespace {

constexpr auto kDrainBound = 60s;                 // once faults and writes stop, everything is in Kafka by then
constexpr auto kPostgresCheckpointEvery = 300ms;  // how often the slot's position is saved
constexpr auto kReconnectDelay = 50ms;
// A quiet outbox's slot follows keepalives (I7): SimSource sends one every 500 ms, and the relay
// reports its flush position at least every status interval.
constexpr auto kQuietSlotBound = 15s;
const std::string kDeadLetterTopic = "dlq";
const std::string kCheckpointTopic = "pgoutbox.checkpoints";

std::string topic_of(const Row& row) { return "outbox.event." + row.type; }
const char* const kTypes[] = {"A", "B"};  // the rows' aggregatetypes: topics outbox.event.A and .B

// The relay's kafka::TopicLimits in the simulator: DescribeConfigs of the simulated Kafka's
// limits. While Kafka is down the request fails and Kafka's default is assumed, as the daemon's
// ClusterTopicLimits does after its 3 s timeout (not waited here), and read again after a minute
// or when a refusal for size makes the relay forget it. It notes each reading for the checks.
class SimTopicLimits final : public kafka::TopicLimits {
 public:
  SimTopicLimits(SimKafka& kafka, std::uint64_t& readings) : kafka_(kafka), readings_(readings) {}
  // The reading of `topic`'s limit this process made last (0: none): what its producers send under.
  std::uint64_t reading(const std::string& topic) const {
    const auto it = last_.find(topic);
    return it == last_.end() ? 0 : it->second;
  }
  // This process read `topic`'s limit, and every reading it made gave the limit as it still is:
  // whatever the relay decided about the topic, it decided knowing its limit.
  bool knows(const std::string& topic) const { return last_.contains(topic) && !wrong_.contains(topic); }
  // The topic's limit changed: what this process read of it no longer holds.
  void changed(const std::string& topic) {
    if (last_.contains(topic)) wrong_.insert(topic);
  }

 protected:
  kafka::TopicLimit read(const std::string& topic) override {
    kafka::TopicLimit limit;
    if (!kafka_.down()) {
      limit.max_message_bytes = kafka_.limit(topic);
      limit.source = kafka::TopicLimit::Source::topic;
    }
    last_[topic] = ++readings_;
    if (limit.max_message_bytes != kafka_.limit(topic)) wrong_.insert(topic);
    return limit;
  }
  std::chrono::steady_clock::time_point now() const override { return kafka_.clock().now(); }

 private:
  SimKafka& kafka_;
  std::uint64_t& readings_;  // the simulation's count, so that readings differ across processes
  std::map<std::string, std::uint64_t> last_;
  std::set<std::string> wrong_;
};

const char* kind_name(Fault::Kind kind) {
  switch (kind) {
    case Fault::Kind::kafka_outage:
      return "kafka-outage";
    case Fault::Kind::relay_crash:
      return "relay-crash";
    case Fault::Kind::relay_stop:
      return "relay-stop";
    case Fault::Kind::postgres_crash:
      return "postgres-crash";
    case Fault::Kind::connection_lost:
      return "connection-lost";
    case Fault::Kind::idempotence_fatal:
      return "idempotence-fatal";
    case Fault::Kind::snapshot_restore:
      return "snapshot-restore";
    case Fault::Kind::checkpoint_refusal:
      return "checkpoint-refusal";
  }
  return "?";
}

const char* moment_name(SinkEvent event) {
  switch (event) {
    case SinkEvent::queue_full:
      return "first queue-full answer";
    case SinkEvent::commit_started:
      return "first commit";
    case SinkEvent::report_served:
      return "first delivery report served";
  }
  return "?";
}

// Thrown through the relay's loop (not a std::exception, which the relay would catch) when the
// schedule kills the process.
struct Killed {};

// What the metrics are told of dead-letter writes (relay::Observer, as metrics::RelayProbe is).
class DeadLetterCount final : public relay::Observer {
 public:
  explicit DeadLetterCount(std::uint64_t& count) : count_(count) {}
  void event_poison(std::string_view /*table*/, std::string_view /*topic*/, relay::PoisonAction action) override {
    if (action == relay::PoisonAction::dead_lettered) ++count_;
  }

 private:
  std::uint64_t& count_;
};

class Run {
 public:
  explicit Run(const Schedule& s) : s_(s), rng_(s.seed), kafka_(clock_, rng_, kafka_faults(s)), config_(configure(s)) {
    if (s.delivery == config::Delivery::exactly_once) {
      kafka_.on_commit = [this](const std::vector<const outbox::Record*>& records) { on_kafka_commit(records); };
    }
    for (std::size_t t = 0; t < 2; ++t) kafka_.set_limit(std::string("outbox.event.") + kTypes[t], s.limits[t]);
    kafka_.set_limit(kDeadLetterTopic, s.dead_letter_limit);
    kafka_.watch.reading = [this](const std::string& topic) { return limits_ ? limits_->reading(topic) : 0; };
    kafka_.watch.produced = [this](const outbox::Record& record, std::size_t bytes) { on_produced(record, bytes); };
    kafka_.watch.size_refused = [this](const SizeRefusal& refusal) { on_size_refusal(refusal); };
    kafka_.watch.event = [this](SinkEvent event) { on_sink_event(event); };
    kafka_.watch.size_refusal_reported = [this](std::uint64_t reading) {
      told_.try_emplace(reading, verdict_.sessions);
    };
  }

  Verdict go() {
    // PGOUTBOX_SIM_LOG=debug shows the relay's log of a replayed schedule.
    const char* log = std::getenv("PGOUTBOX_SIM_LOG");
    spdlog::set_level(log != nullptr ? spdlog::level::from_str(log) : spdlog::level::off);
    plan_workload();
    plan_faults();
    save_slot_periodically();
    while (!done_ && verdict_.ok) {
      run_process();
      limits_ = nullptr;  // the process's, gone with it
      if (done_ || !verdict_.ok) break;
      advance_to(restart_at_);
    }
    if (verdict_.ok) check_final();
    verdict_.virtual_time = std::chrono::duration_cast<milliseconds>(clock_.now() - start_);
    verdict_.coordinator_aborts = kafka_.coordinator_aborts();
    return verdict_;
  }

 private:
  static KafkaFaults kafka_faults(const Schedule& s) {
    KafkaFaults f;
    f.commit_aborts = s.commit_aborts;
    f.late_commits = s.commit_aborts > 0 ? 2 : 0;
    f.queue_capacity = s.queue_capacity;
    f.queue_bytes = s.queue_bytes;
    f.dead_letter_refuses = s.dead_letter_refuses;
    f.dead_letter_topic = kDeadLetterTopic;
    f.checkpoint_topic = kCheckpointTopic;
    f.transaction_timeout = s.transaction_timeout;
    return f;
  }
  static config::Config configure(const Schedule& s) {
    auto c = relay::testing::test_config();
    c.delivery = s.delivery;
    c.poison.policy = s.policy;
    c.poison.max_retries = s.max_retries;
    c.poison.dead_letter_topic = kDeadLetterTopic;
    c.poison.retry_backoff = 5ms;
    c.reconnect.max = 100ms;
    c.limits.max_in_flight_records = s.max_in_flight_records;
    c.limits.max_in_flight_bytes = 1ULL << 40;
    c.checkpoint.topic = kCheckpointTopic;
    c.checkpoint.interval = s.checkpoint_interval;
    c.kafka.transaction_interval = s.transaction_interval;
    c.kafka.send_when_caught_up = s.send_when_caught_up;
    c.kafka.alternate_producers = s.alternate_producers;
    c.shutdown_timeout = 5s;
    // The simulated broker measures batches uncompressed: so does the relay (kafka::batch_bytes).
    c.kafka.properties["compression.type"] = "none";
    c.kafka.properties["transaction.timeout.ms"] = std::to_string(s.transaction_timeout.count());
    config::MessageConfig m;
    m.prefix = "outbox";
    c.messages.push_back(m);
    return c;
  }

  void fail(std::string what) {
    if (!verdict_.ok) return;
    verdict_.ok = false;
    verdict_.failure =
        fmt::format("at {} ms: {}", std::chrono::duration_cast<milliseconds>(clock_.now() - start_).count(), what);
    done_ = true;
  }

  // Transactions arrive over the first seconds, each committed at its own moment.
  void plan_workload() {
    Rng plan(s_.seed ^ 0x5eedULL);
    std::uniform_int_distribution<int> arrival(0, 4000);
    std::vector<int> times;
    for (int i = 0; i < s_.transactions; ++i) times.push_back(arrival(plan));
    std::sort(times.begin(), times.end());
    std::uint64_t position = 0x1000;
    int id = 0;
    for (int i = 0; i < s_.transactions; ++i) {
      WalTxn txn;
      const bool run = s_.poison_run > 0 && i == s_.transactions / 2;
      if (!run && std::bernoulli_distribution(s_.messages / 4)(plan)) {
        // A non-transactional message: alone, between transactions.
        Row row;
        row.id = ++id;
        row.event_id = fmt::format("00000000-0000-0000-0000-{:012d}", row.id);
        row.key = "k1";
        row.type = "A";
        row.kind = Row::Kind::non_transactional_message;
        any_poison_ = true;
        where_[row.event_id] = {static_cast<std::size_t>(i), 0};
        txn.rows.push_back(std::move(row));
        position += std::uniform_int_distribution<int>(8, 400)(plan);
        txn.commit_lsn = txn.end_lsn = Lsn{position};
        position += std::uniform_int_distribution<int>(0, 200)(plan);
        verdict_.rows += 1;
        wal_.push_back(std::move(txn));
        const Lsn server_end{position};
        clock_.schedule(start_ + milliseconds(times[static_cast<std::size_t>(i)]), [this, i, server_end] {
          append(wal_[static_cast<std::size_t>(i)]);
          slot_.wal_end = server_end;
          if (source_ != nullptr) source_->wake();
        });
        continue;
      }
      const bool huge = !run && std::bernoulli_distribution(s_.huge)(plan);
      const int rows = run    ? s_.poison_run
                       : huge ? std::uniform_int_distribution<int>(200, 1500)(plan)
                              : std::uniform_int_distribution<int>(1, s_.max_rows)(plan);
      for (int r = 0; r < rows; ++r) {
        Row row;
        row.id = ++id;
        row.event_id = fmt::format("00000000-0000-0000-0000-{:012d}", row.id);
        row.key = fmt::format("k{}", std::uniform_int_distribution<int>(1, s_.keys)(plan));
        row.type = std::bernoulli_distribution(0.5)(plan) ? "A" : "B";
        if (run) {
          row.poison = row.malformed = true;
        } else {
          row.poison = std::bernoulli_distribution(s_.poison)(plan);
          if (std::bernoulli_distribution(s_.messages)(plan)) row.kind = Row::Kind::message;
        }
        if (!row.poison && (s_.oversized > 0 || s_.large > 0)) size_row(row, plan);
        // With a queue limited in bytes, rows of many sizes: a large one waits for room that a
        // smaller record produced after it (a checkpoint) may find.
        if (s_.queue_bytes > 0 && row.pad == 0 && s_.limits[row.type == "A" ? 0 : 1] > 65'536)
          row.pad = static_cast<std::size_t>(std::uniform_int_distribution<int>(0, 1200)(plan));
        if (row.poison || row.oversized || row.maybe_oversized) {
          any_poison_ = true;
          ++poison_rows_;
        }
        where_[row.event_id] = {static_cast<std::size_t>(i), static_cast<std::size_t>(r)};
        txn.rows.push_back(std::move(row));
      }
      position += static_cast<std::uint64_t>(rows) * 64 + std::uniform_int_distribution<int>(8, 400)(plan);
      txn.commit_lsn = Lsn{position};
      txn.end_lsn = Lsn{position + 16};
      // Other work (rolled back transactions, other tables) moves the server's WAL on.
      position += 16 + std::uniform_int_distribution<int>(0, 200)(plan);
      verdict_.rows += txn.rows.size();
      wal_.push_back(std::move(txn));
      const Lsn server_end{position};
      clock_.schedule(start_ + milliseconds(times[static_cast<std::size_t>(i)]), [this, i, server_end] {
        append(wal_[static_cast<std::size_t>(i)]);
        slot_.wal_end = server_end;
        if (source_ != nullptr) source_->wake();
      });
    }
    quiet_ = start_ + 4001ms;
    last_id_ = id;
    slot_.confirmed = slot_.saved = slot_.wal_end = Lsn{0x100};
  }

  // Pads a row against its topic's limit (only limits of up to 64 KiB: rows stay small): larger
  // than the limit, or larger than the producers' batch.size under it (batch_size_under keeps
  // 512 bytes below the limit; the batch header, the key, the headers and the payload's JSON add
  // about 135 bytes to the padding, so a padding 360-460 bytes short of the limit makes a record
  // that fits only a batch of its own). A row that only a lowered limit makes too large may go
  // either way.
  void size_row(Row& row, Rng& plan) {
    const int t = row.type == "A" ? 0 : 1;
    const std::size_t limit = s_.limits[static_cast<std::size_t>(t)];
    if (limit > 65'536) return;
    const auto uniform = [&](int lo, int hi) {
      return static_cast<std::size_t>(std::uniform_int_distribution<int>(lo, hi)(plan));
    };
    if (std::bernoulli_distribution(s_.oversized)(plan)) {
      row.pad = limit + uniform(1, 1500);
    } else if (std::bernoulli_distribution(s_.large)(plan)) {
      row.pad = limit - 460 + uniform(0, 100);
    } else if (s_.lowered && s_.lowered->topic == t && std::bernoulli_distribution(s_.oversized)(plan)) {
      row.pad = s_.lowered->bytes + uniform(1, 1500);
    }
    row.oversized = row.pad > limit;
    // With a margin over those 135 bytes.
    row.maybe_oversized = !row.oversized && s_.lowered && s_.lowered->topic == t && row.pad + 300 > s_.lowered->bytes;
  }

  void plan_faults() {
    if (s_.lowered) {
      const auto topic = std::string("outbox.event.") + kTypes[s_.lowered->topic];
      const auto bytes = s_.lowered->bytes;
      quiet_ = std::max(quiet_, start_ + s_.lowered->at);
      clock_.schedule(start_ + s_.lowered->at, [this, topic, bytes] {
        spdlog::debug("sim: topic {}'s max.message.bytes lowered to {}", topic, bytes);
        kafka_.set_limit(topic, bytes);
        if (limits_ != nullptr) limits_->changed(topic);
      });
    }
    for (const auto& f : s_.faults) {
      const auto at = start_ + f.at;
      quiet_ = std::max(quiet_, at + f.length);
      switch (f.kind) {
        case Fault::Kind::kafka_outage:
          kafka_.add_outage(at, at + f.length);
          break;
        case Fault::Kind::relay_crash:
        case Fault::Kind::relay_stop:
          if (f.moment) {
            clock_.schedule(at, [this, f] { armed_.push_back(f); });
            break;
          }
          clock_.schedule(at, [this, f] {
            if (relay_ == nullptr) return;
            restart_at_ = clock_.now() + f.length;
            if (f.kind == Fault::Kind::relay_crash) throw Killed{};
            stopping_on_purpose_ = true;
            relay_->stop();
          });
          break;
        case Fault::Kind::postgres_crash:
          clock_.schedule(at, [this] {
            slot_.crash();
            if (source_ != nullptr) source_->drop("simulated: Postgres crashed");
          });
          break;
        case Fault::Kind::connection_lost:
          clock_.schedule(at, [this] {
            if (source_ != nullptr) source_->drop("simulated: the replication connection was lost");
          });
          break;
        case Fault::Kind::idempotence_fatal:
          kafka_.break_idempotence_at(at);
          break;
        case Fault::Kind::snapshot_restore: {
          auto snapshot = std::make_shared<Snapshot>();
          clock_.schedule(start_ + std::max(0ms, f.at - f.length), [this, snapshot] {
            *snapshot = Snapshot{slot_.wal.size(), slot_.saved};
          });
          clock_.schedule(at, [this, snapshot] { restore(*snapshot); });
          break;
        }
        case Fault::Kind::checkpoint_refusal:
          clock_.schedule(at, [this, f] {
            spdlog::debug("sim: the checkpoint topic's ACL is revoked");
            kafka_.refuse_checkpoints(true);
            acl_granted_after_ = f.length;
          });
          break;
      }
    }
    // Exactly-once learns of a refused record by aborting the whole Kafka transaction: each
    // poison row costs up to max_retries + 2 sessions, each publishing its transaction again.
    // At-least-once's producer stops at a refused batch (gapless, docs/spec.md I4): each poison
    // row costs up to one session, which publishes the unconfirmed transactions again.
    auto bound = std::chrono::duration_cast<milliseconds>(kDrainBound);
    const std::uint64_t sessions_per_poison_row =
        s_.delivery == config::Delivery::exactly_once ? s_.max_retries + 2 : 1;
    bound += poison_rows_ * sessions_per_poison_row * std::chrono::duration_cast<milliseconds>(kDrainBound) / 4;
    // A lowered limit costs a session or two before the relay reads it again (docs/spec.md I13).
    if (s_.lowered) bound += std::chrono::duration_cast<milliseconds>(kDrainBound) / 2;
    drain_deadline_ = quiet_ + bound;
    drain_bound_ = bound;
  }

  // A kill or a stop armed for this moment of a producer's life happens now, in the middle of
  // the call (a kill: nothing after it runs; a stop: right after it, as a signal's would).
  void on_sink_event(SinkEvent event) {
    if (relay_ == nullptr || finishing_) return;
    const auto it = std::find_if(armed_.begin(), armed_.end(), [event](const Fault& f) { return f.moment == event; });
    if (it == armed_.end()) return;
    const auto f = *it;
    armed_.erase(it);
    spdlog::debug("sim: {} on a producer's {}", kind_name(f.kind), moment_name(*f.moment));
    restart_at_ = clock_.now() + f.length;
    if (f.kind == Fault::Kind::relay_crash) throw Killed{};
    clock_.schedule_after(0ms, [this] {
      if (relay_ == nullptr || finishing_) return;
      stopping_on_purpose_ = true;
      relay_->stop();
    });
  }

  // A transaction reaches the WAL: it commits now.
  void append(const WalTxn& txn) {
    slot_.wal.push_back(txn);
    slot_.wal.back().commit_time =
        std::chrono::duration_cast<std::chrono::microseconds>(clock_.now() - start_).count() + 1;
  }

  // What a storage snapshot holds of the WAL and the slot: the slot as its last Postgres
  // checkpoint saved it.
  struct Snapshot {
    std::size_t wal_size = 0;
    Lsn saved;
  };

  // The database comes back from `snapshot`, on the same timeline. What was committed since is
  // gone from it; other transactions take its positions (new events, the same xids, later commit
  // times), and a non-transactional message is written again with its content at its position
  // (a forged copy). Kafka keeps what the lost history published: those events are no one's now.
  void restore(const Snapshot& snapshot) {
    spdlog::debug("sim: the database is restored from a snapshot of {} transaction(s), the slot at {}",
                  snapshot.wal_size, snapshot.saved.to_string());
    restored_ = std::max(restored_, snapshot.wal_size);
    const std::size_t written = slot_.wal.size();
    slot_.wal.resize(snapshot.wal_size);
    for (std::size_t i = snapshot.wal_size; i < written; ++i) {
      auto& txn = wal_[i];
      for (std::size_t r = 0; r < txn.rows.size(); ++r) {
        auto& row = txn.rows[r];
        if (row.kind == Row::Kind::non_transactional_message) {
          forged_.insert(row.event_id);
          continue;
        }
        lost_.insert(row.event_id);
        row.id = ++last_id_;
        row.event_id = fmt::format("00000000-0000-0000-0000-{:012d}", row.id);
        where_[row.event_id] = {i, r};
      }
      append(txn);
    }
    slot_.confirmed = slot_.saved = snapshot.saved;
    verified_ = std::min(verified_, snapshot.wal_size);
    checkpoint_verified_ = std::min(checkpoint_verified_, snapshot.wal_size);
    if (durable_txns_ >= snapshot.wal_size) {
      durable_txns_ = snapshot.wal_size;
      durable_rows_ = 0;
    }
    if (source_ != nullptr) source_->drop("simulated: the database was restored from a storage snapshot");
  }

  void save_slot_periodically() {
    clock_.schedule_after(kPostgresCheckpointEvery, [this] {
      slot_.saved = slot_.confirmed;
      if (!done_) save_slot_periodically();
    });
  }

  // Moves virtual time on (nothing of a relay runs) until `when`.
  void advance_to(relay::Clock::time_point when) {
    while (clock_.now() < when && clock_.next_due() <= when) {
      try {
        clock_.fire_next();
      } catch (const Killed&) {
        // nothing runs to be killed
      }
    }
    if (clock_.now() < when) clock_.schedule(when, [] {});
    while (clock_.now() < when) clock_.fire_next();
  }

  // One pgoutbox process: sessions until it is killed, stopped, or stops with a fatal error.
  void run_process() {
    ++verdict_.processes;
    // A process's memory: what Kafka refused (exactly-once), and the checkpoints the stream
    // showed were not its history.
    auto refused = std::make_shared<relay::RefusedRecords>();
    auto refused_checkpoints = std::make_shared<relay::RefusedCheckpoints>();
    // And each destination topic's limits, read once for the process (app/run_command.cpp).
    auto limits = std::make_shared<SimTopicLimits>(kafka_, readings_);
    limits_ = limits.get();
    restart_at_ = clock_.now() + kReconnectDelay;
    // A refusal a stopped or killed process met is not this one's to name.
    kafka_.count_checkpoint_refusals_anew();
    while (!done_) {
      ++verdict_.sessions;
      boost::asio::io_context io;
      DeadLetterCount observer(dead_letters_counted_);
      // The session's batch.size, and its producers', as relay::Session sets them.
      const auto batch_size = relay::producer_batch_size(config_, limits.get());
      kafka::ProducerSettings producer;
      producer.properties = config_.kafka.properties;
      producer.batch_limit = limits->smallest().value_or(0);
      relay::Relay relay(config_, io, clock_, kafka_.factory(kafka::effective_batch_size(producer)), observer);
      SimSource source(
          slot_, clock_, rng_, [this](Lsn lsn) { on_flush(lsn); }, [this, &relay] { check_caps(relay); });
      relay::SessionStart start;
      start.slot_confirmed = slot_.confirmed;
      start.identity = identity_;
      start.timeline = 1;
      start.server_position = slot_.wal_end;
      if (s_.delivery == config::Delivery::exactly_once) {
        start.transactional_id = "pgoutbox-sim";
        // One process at a time streams from the slot: a fence it meets is the coordinator's
        // (a transaction that outlived transaction.timeout.ms), never a newer instance's.
        start.holds_slot = [] { return true; };
      }
      start.read_checkpoints = [this, tid = start.transactional_id] {
        const kafka::CheckpointKey key(config_.checkpoint.signing_key);
        return kafka_.read_checkpoints(kCheckpointTopic, identity_, tid, &key);
      };
      start.refused = refused;
      start.refused_checkpoints = refused_checkpoints;
      start.topic_limits = limits;
      start.batch_size = batch_size;
      start.jitter_seed = s_.seed + 1;
      relay::Outcome outcome;
      relay_ = &relay;
      source_ = &source;
      stopping_on_purpose_ = false;
      watch_drain();
      try {
        outcome = relay.run(source, std::move(start));
        verdict_.refused_before_sending += relay.counters().refused_before_sending;
      } catch (const Killed&) {
        verdict_.refused_before_sending += relay.counters().refused_before_sending;
        relay_ = nullptr;
        source_ = nullptr;
        return;
      } catch (const test::VirtualClock::Idle&) {
        relay_ = nullptr;
        source_ = nullptr;
        fail("deadlock: the relay waits for nothing that can ever come (no handler ready, no timer armed)");
        return;
      }
      relay_ = nullptr;
      source_ = nullptr;
      spdlog::info("simulation: the session ended: {}", outcome.reason);
      switch (outcome.kind) {
        case relay::Outcome::Kind::stopped:
          if (finishing_) {
            done_ = true;
            if (outcome.unacknowledged) fail("the final stop left records unacknowledged: " + outcome.reason);
          } else if (!stopping_on_purpose_) {
            fail("the session stopped by itself: " + outcome.reason);
          }
          return;
        case relay::Outcome::Kind::fatal:
          if (outcome.cause == relay::Fatal::checkpoint_refused && kafka_.faults().checkpoint_refuses) {
            // Exit 24 named it: an operator grants the ACL again and starts pgoutbox.
            spdlog::debug("sim: the ACL is granted again; pgoutbox starts in {} ms", acl_granted_after_.count());
            kafka_.refuse_checkpoints(false);
            ++verdict_.checkpoint_refusals;
            restart_at_ = clock_.now() + acl_granted_after_;
            return;
          }
          if (outcome.cause == relay::Fatal::poison &&
              (any_poison_ && (s_.policy == config::PoisonPolicy::stop || s_.dead_letter_refuses))) {
            stopped_for_poison_ = true;
            done_ = true;
            return;
          }
          fail(fmt::format("the relay exited with code {}: {}", relay::exit_code(outcome.cause), outcome.reason));
          return;
        case relay::Outcome::Kind::reconnect:
          // Kafka and Postgres stayed up and answered every call: nothing heals by a new session,
          // so one that ends there is a stall the next session may meet again.
          if (s_.faults.empty() && s_.commit_aborts == 0 && !outcome.at_once) {
            fail("a session ended for a new one with no fault to cause it: " + outcome.reason);
            return;
          }
          advance_to(clock_.now() + kReconnectDelay);
          break;
      }
    }
  }

  // Once writes and faults are over, the relay must have everything in Kafka within the bound;
  // then it is stopped gracefully (and must stop cleanly).
  void watch_drain() {
    if (drain_watch_armed_) return;
    drain_watch_armed_ = true;
    clock_.schedule(std::max(clock_.now(), quiet_) + 100ms, [this] {
      drain_watch_armed_ = false;
      if (done_ || finishing_) return;
      if (drained()) {
        if (relay_ == nullptr) {
          done_ = true;
          return;
        }
        // I12: a checkpoint topic that refuses pgoutbox's writes is named by exit 24 at the first
        // refusal the running process meets (one at a stop is not: the stop goes on without it);
        // a relay that goes on leaves every later crash unbounded (at-least-once) or commits
        // nothing (exactly-once).
        if (kafka_.faults().checkpoint_refuses && kafka_.checkpoints_refused() > 0) {
          fail(
              fmt::format("a refused checkpoint not named (I12): the checkpoint topic refused {} checkpoint(s), and "
                          "the relay goes on without exiting 24",
                          kafka_.checkpoints_refused()));
          throw Killed{};
        }
        // I7: with everything published, the slot follows the server's WAL past what is not
        // the outbox's (other tables, rolled-back work), on keepalives, so it pins none of it.
        if (slot_.confirmed < slot_.wal_end) {
          if (!quiet_since_) quiet_since_ = clock_.now();
          if (clock_.now() - *quiet_since_ <= kQuietSlotBound) {
            watch_drain();
            return;
          }
          fail(
              fmt::format("quiet slot (I7): everything is in Kafka, and {} s later the slot is still confirmed at "
                          "{}, the server's WAL at {}",
                          std::chrono::duration_cast<std::chrono::seconds>(kQuietSlotBound).count(),
                          slot_.confirmed.to_string(), slot_.wal_end.to_string()));
          throw Killed{};
        }
        finishing_ = true;
        relay_->stop();
        return;
      }
      quiet_since_.reset();
      if (clock_.now() > drain_deadline_) {
        fail(fmt::format("stall: {} s after the last write and fault, {}", drain_bound_.count() / 1000,
                         what_is_missing()));
        if (relay_ != nullptr) throw Killed{};
        return;
      }
      watch_drain();
    });
  }

  bool durable(const Row& row) const {
    const bool in_topic = kafka_.visible_copies(topic_of(row), row.event_id) > 0;
    const bool dead_lettered =
        s_.policy == config::PoisonPolicy::dead_letter && kafka_.visible_copies(kDeadLetterTopic, row.event_id) > 0;
    if (row.maybe_oversized) return in_topic || dead_lettered;
    if (!row.poison && !row.oversized && row.kind != Row::Kind::non_transactional_message) return in_topic;
    return dead_lettered;
  }
  bool drained() {
    if (slot_.wal.size() < wal_.size()) return false;
    // A row in Kafka stays there (read_committed sees no record go): the rows found durable are
    // not looked up again.
    for (; durable_txns_ < wal_.size(); ++durable_txns_, durable_rows_ = 0) {
      const auto& rows = wal_[durable_txns_].rows;
      for (; durable_rows_ < rows.size(); ++durable_rows_) {
        if (!durable(rows[durable_rows_])) return false;
      }
    }
    return slot_.confirmed >= wal_.back().end_lsn || wal_.empty();
  }
  std::string what_is_missing() const {
    std::uint64_t missing = 0;
    std::string first;
    for (const auto& txn : wal_) {
      for (const auto& row : txn.rows) {
        if (!durable(row)) {
          if (missing++ == 0) first = row.event_id;
        }
      }
    }
    return fmt::format("{} of {} row(s) not in Kafka (first {}), slot confirmed at {} of {}", missing, verdict_.rows,
                       first, slot_.confirmed.to_string(), wal_.empty() ? "-" : wal_.back().end_lsn.to_string());
  }

  // I10: a committed checkpoint covers only what read_committed consumers see. Checked at each
  // commit, so a checkpoint that runs ahead of its records is caught when it is written, not only
  // when a crash before the next commit makes a later session skip them.
  void on_kafka_commit(const std::vector<const outbox::Record*>& records) {
    const kafka::CheckpointKey key(config_.checkpoint.signing_key);
    for (const auto* record : records) {
      if (record->topic != kCheckpointTopic || record->tombstone) continue;
      kafka::CheckpointScan scan;
      kafka::scan_record(scan, identity_, "pgoutbox-sim", &key, record->key.value_or(""), record->value, 0, 0);
      if (!scan.mine) continue;
      const Lsn covered = scan.mine->end();
      while (checkpoint_verified_ < wal_.size() && wal_[checkpoint_verified_].end_lsn <= covered) {
        for (const auto& row : wal_[checkpoint_verified_].rows) {
          if (durable(row)) continue;
          fail(
              fmt::format("loss (I10): a committed checkpoint covers {} past event {} (transaction ending {}), which "
                          "read_committed consumers do not see",
                          covered.to_string(), row.event_id, wal_[checkpoint_verified_].end_lsn.to_string()));
          if (relay_ != nullptr) throw Killed{};
          return;
        }
        ++checkpoint_verified_;
      }
    }
  }

  // I13: a record the relay knew Kafka would refuse is never sent. Checked as each record is
  // handed to a producer, on a topic whose limit the relay read right (in this process every
  // reading of it gave the limit it still has, so whatever the relay decided about the topic,
  // it decided knowing it).
  void on_produced(const outbox::Record& record, std::size_t bytes) {
    if (limits_ == nullptr || !limits_->knows(record.topic)) return;
    const auto limit = kafka_.limit(record.topic);
    if (SimKafka::kBatchHeader + bytes <= limit) return;
    fail(fmt::format(
        "refused record sent (I13): event {} takes {} bytes in a batch of its own, over the max.message.bytes of {} "
        "({}) that the relay had read; it should have met poison.policy without being sent",
        record.event_id, SimKafka::kBatchHeader + bytes, record.topic, limit));
    throw Killed{};
  }

  // I13: no batch is refused for its size when the relay knew its topic's limit (its producers'
  // batch.size under it, and every record larger than batch.size alone and within it); and a
  // limit lowered while the relay runs is read again after the first refusal for size the relay
  // is told of: a later session that meets a refusal under the same reading of the limit means
  // the relay never read it again, and every session would pay for it.
  void on_size_refusal(const SizeRefusal& refusal) {
    ++verdict_.size_refusals;
    if (limits_ != nullptr && limits_->knows(refusal.topic)) {
      fail(
          fmt::format("batch refused for its size (I13): Kafka refused a batch of {} record(s), {} bytes, to {}, "
                      "whose max.message.bytes ({}) the relay had read",
                      refusal.records, refusal.bytes, refusal.topic, refusal.limit));
      throw Killed{};
    }
    if (refusal.isolated) return;
    const auto told = told_.find(refusal.reading);
    if (told != told_.end() && told->second < verdict_.sessions) {
      fail(fmt::format(
          "limit never read again (I13): Kafka refused a batch of {} record(s), {} bytes, to {} (max.message.bytes "
          "{}) in session {}, under the reading of the limit the relay made before it was told, in session {}, of a "
          "batch refused for its size",
          refusal.records, refusal.bytes, refusal.topic, refusal.limit, verdict_.sessions, told->second));
      throw Killed{};
    }
  }

  // I2: the slot is confirmed only past what Kafka holds.
  void on_flush(Lsn lsn) {
    while (verified_ < wal_.size() && wal_[verified_].end_lsn <= lsn) {
      for (const auto& row : wal_[verified_].rows) {
        if (!durable(row)) {
          fail(
              fmt::format("loss (I2): the slot is confirmed at {} past event {} (transaction ending {}), which "
                          "Kafka does not hold{}",
                          lsn.to_string(), row.event_id, wal_[verified_].end_lsn.to_string(),
                          row.poison      ? " (a poison row)"
                          : row.oversized ? " (a row over its topic's limit)"
                                          : ""));
          if (relay_ != nullptr) throw Killed{};
          return;
        }
      }
      ++verified_;
    }
  }

  // I6: nothing is read past the in-flight caps (exactly-once: one Postgres transaction may
  // exceed them, and its end commits).
  void check_caps(const relay::Relay& relay) {
    auto cap = s_.max_in_flight_records;
    if (s_.delivery == config::Delivery::exactly_once) cap += largest_transaction();
    if (relay.in_flight_records() > cap) {
      fail(fmt::format("caps (I6): {} records in flight, the cap is {}", relay.in_flight_records(), cap));
      throw Killed{};
    }
  }
  std::uint64_t largest_transaction() {
    if (largest_ == 0) {
      for (const auto& t : wal_) largest_ = std::max<std::uint64_t>(largest_, t.rows.size());
    }
    return largest_;
  }

  // I3, I4 and I10 on what a read_committed consumer reads at the end.
  void check_final() {
    if (!stopped_for_poison_ && !drained()) {
      fail("not drained at the end: " + what_is_missing());
      return;
    }
    // I8: every poison record that reached the dead-letter topic was counted (the observer feeds
    // pgoutbox_events_dead_lettered_total), but for those in a Kafka transaction whose commit the
    // process never learned of (killed while its commit call timed out): never fewer.
    std::set<std::string> dead_lettered;
    const auto unlearned = kafka_.never_learned(kDeadLetterTopic);
    for (const auto* record : kafka_.visible(kDeadLetterTopic)) {
      if (!lost_.contains(record->event_id) && !unlearned.contains(record->event_id))
        dead_lettered.insert(record->event_id);
    }
    if (dead_letters_counted_ < dead_lettered.size()) {
      fail(
          fmt::format("poison not counted (I8): {} poison record(s) in the dead-letter topic, {} counted dead-lettered",
                      dead_lettered.size(), dead_letters_counted_));
      return;
    }
    const bool exactly_once = s_.delivery == config::Delivery::exactly_once;
    for (const auto& topic : kafka_.topics()) {
      if (topic == kCheckpointTopic) continue;
      std::set<std::string> seen;
      std::map<std::string, std::pair<std::size_t, std::size_t>> last_of_key;
      for (const auto* record : kafka_.visible(topic)) {
        // An event of a history a restore undid: in Kafka, and no transaction's now.
        if (lost_.contains(record->event_id)) continue;
        const auto it = where_.find(record->event_id);
        if (it == where_.end()) {
          fail(fmt::format("phantom (I3): {} holds event {} that no transaction wrote", topic, record->event_id));
          return;
        }
        const auto& row = wal_[it->second.first].rows[it->second.second];
        if (topic != kDeadLetterTopic && (topic != topic_of(row) || record->key != row.key)) {
          fail(fmt::format("phantom (I3): event {} in {} with key {}", record->event_id, topic,
                           record->key.value_or("")));
          return;
        }
        if (!seen.insert(record->event_id).second) {
          ++verdict_.duplicates;
          // A restore costs duplicates (docs/spec.md I11): the checkpoint written over the undone
          // history is refused, and what the snapshot's slot had not confirmed is published
          // again; a forged message is another one with the same content.
          const bool restored = it->second.first < restored_ || forged_.contains(record->event_id);
          if (exactly_once && !restored) {
            fail(fmt::format("duplicate (I10): a read_committed consumer reads event {} twice in {}", record->event_id,
                             topic));
            return;
          }
          continue;
        }
        if (topic == kDeadLetterTopic) continue;
        auto [previous, first] = last_of_key.try_emplace(row.key, it->second);
        if (!first) {
          if (it->second < previous->second) {
            fail(fmt::format("order (I4): in {}, event {} of key {} comes after a later event of that key{}", topic,
                             record->event_id, row.key,
                             kafka_.refused_with_batch.contains(record->event_id)
                                 ? " (Kafka refused it with its batch, refused whole)"
                                 : ""));
            return;
          }
          previous->second = it->second;
        }
      }
    }
  }

  const Schedule& s_;
  test::VirtualClock clock_;
  const relay::Clock::time_point start_ = clock_.now();
  Rng rng_;
  SimKafka kafka_;
  config::Config config_;
  SimSlot slot_;
  std::vector<WalTxn> wal_;              // every transaction the schedule commits, arrived or not
  std::size_t checkpoint_verified_ = 0;  // wal_ entries a committed checkpoint covered, checked
  std::map<std::string, std::pair<std::size_t, std::size_t>> where_;  // event id → transaction, row
  const kafka::SlotIdentity identity_{"7000000000000000001", "shop", "pgoutbox"};
  relay::Relay* relay_ = nullptr;
  SimSource* source_ = nullptr;
  SimTopicLimits* limits_ = nullptr;  // the running process's
  std::uint64_t readings_ = 0;        // of a topic's limit, by any process
  // Readings of a limit under which a batch refused for its size was reported to the relay, and
  // the session it was reported in.
  std::map<std::uint64_t, std::uint64_t> told_;
  relay::Clock::time_point quiet_{};
  relay::Clock::time_point drain_deadline_{};
  relay::Clock::time_point restart_at_{};
  milliseconds acl_granted_after_{};  // how long after exit 24 the checkpoint topic's ACL is granted
  std::size_t verified_ = 0;
  std::size_t durable_txns_ = 0;  // drained(): wal_ entries wholly in Kafka
  std::size_t durable_rows_ = 0;  // and rows of the next one
  std::uint64_t largest_ = 0;
  bool any_poison_ = false;
  std::uint64_t poison_rows_ = 0;
  milliseconds drain_bound_{0};
  bool done_ = false;
  bool finishing_ = false;
  bool stopping_on_purpose_ = false;
  bool stopped_for_poison_ = false;
  std::uint64_t dead_letters_counted_ = 0;  // dead-letter writes the observer was told of, over processes
  bool drain_watch_armed_ = false;
  std::optional<relay::Clock::time_point> quiet_since_;  // drained, the slot behind the server's WAL
  std::vector<Fault> armed_;  // kills and stops waiting for their moment of a producer's life
  // Restores: the transactions every snapshot restored held (the most of any), the events of
  // undone histories, and the non-transactional messages written again at their positions.
  std::size_t restored_ = 0;
  std::set<std::string> lost_;
  std::set<std::string> forged_;
  int last_id_ = 0;
  Verdict verdict_;
};

}  // namespace

Schedule Schedule::from_seed(std::uint64_t seed, config::Delivery delivery) {
  Rng rng(seed * 0x9E3779B97F4A7C15ULL + 1);
  auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Schedule s;
  s.seed = seed;
  s.delivery = delivery;
  s.transactions = uniform(1, 40);
  s.max_rows = uniform(1, 20);
  s.huge = chance(0.1) ? 0.03 : 0;
  s.poison = chance(0.25) ? 0.02 : 0;
  s.keys = uniform(1, 4);
  s.messages = chance(0.3) ? 0.2 : 0;
  s.policy = chance(0.85) ? config::PoisonPolicy::dead_letter : config::PoisonPolicy::stop;
  s.max_retries = static_cast<std::uint32_t>(uniform(0, 2));
  const std::uint64_t caps[] = {20, 200, 20'000};
  s.max_in_flight_records = caps[uniform(0, 2)];
  s.checkpoint_interval = milliseconds(chance(0.5) ? 50 : 1000);
  s.transaction_interval = milliseconds(chance(0.5) ? 20 : 100);
  s.send_when_caught_up = chance(0.8);
  const std::size_t queues[] = {10, 100, 100'000};
  s.queue_capacity = queues[uniform(0, 2)];
  s.commit_aborts = chance(0.3) ? 0.05 : 0;
  s.dead_letter_refuses = chance(0.05);
  const int faults = uniform(0, 4);
  for (int i = 0; i < faults; ++i) {
    Fault f{static_cast<Fault::Kind>(uniform(0, 5)), milliseconds(uniform(0, 5000)), 0ms};
    switch (f.kind) {
      case Fault::Kind::kafka_outage:
        f.length = milliseconds(uniform(100, 8000));
        break;
      case Fault::Kind::relay_crash:
      case Fault::Kind::relay_stop:
        f.length = milliseconds(uniform(10, 2000));
        break;
      default:
        break;
    }
    s.faults.push_back(f);
  }
  s.alternate_producers = chance(0.7);  // drawn after the above: they stay what each seed drew before
  // Topic limits, drawn last for the same reason.
  if (chance(0.3)) {
    const std::size_t sizes[] = {Schedule::kDefaultLimit, 65'536, 16'384, 4'096, 2'048};
    for (auto& limit : s.limits) limit = sizes[uniform(0, 4)];
    if (chance(0.2)) s.dead_letter_limit = 4'096;
    if (chance(0.3)) {
      const int topic = uniform(0, 1);
      std::vector<std::size_t> lower;
      for (const auto bytes : sizes) {
        if (bytes < s.limits[static_cast<std::size_t>(topic)]) lower.push_back(bytes);
      }
      if (!lower.empty()) {
        s.lowered = LimitChange{topic, milliseconds(uniform(0, 5000)),
                                lower[static_cast<std::size_t>(uniform(0, static_cast<int>(lower.size()) - 1))]};
      }
    }
    s.oversized = chance(0.5) ? 0.03 : 0;
    s.large = chance(0.5) ? 0.05 : 0;
    // A limit smaller than 1,024 bytes (batch.size once stopped there), drawn last again; never
    // where the limit is lowered later, which must lower it.
    const int tiny = uniform(0, 1);
    if (chance(0.15) && !(s.lowered && s.lowered->topic == tiny)) s.limits[static_cast<std::size_t>(tiny)] = 1'000;
  }
  // A producer queue of 1 to 5 records (issue 37: "queue full" at nearly every produce(), so
  // the checkpoint meets records still waiting for room), drawn last again. Not with transactions
  // of thousands of rows: what waits is tried again every SendBacklog::kRetry (20 ms), so such a
  // queue moves about 50 records a second, and their schedules would end before they could.
  if (chance(0.1) && s.huge == 0) s.queue_capacity = static_cast<std::size_t>(uniform(1, 5));
  // librdkafka's queue limit in bytes, 3-8 KB, drawn last again; not with transactions of
  // thousands of rows, and only with Kafka's default topic limits: its rows are padded to at
  // most 1,200 bytes and none larger, so every record fits it alone (the daemon's queue holds at
  // least limits.max_in_flight_bytes, 16 MiB by default).
  const bool default_limits = s.limits == std::array<std::size_t, 2>{Schedule::kDefaultLimit, Schedule::kDefaultLimit};
  if (chance(0.1) && s.huge == 0 && default_limits) s.queue_bytes = static_cast<std::size_t>(uniform(3000, 8000));
  // A restore from a storage snapshot (docs/spec.md I11), drawn last again; more often with
  // non-transactional messages, whose forged copies it writes.
  if (chance(s.messages > 0 ? 0.2 : 0.05)) {
    s.faults.push_back(
        Fault{Fault::Kind::snapshot_restore, milliseconds(uniform(500, 5000)), milliseconds(uniform(100, 3000))});
  }
  // A kill or a stop at a moment of a producer's life rather than of the clock (issue 37), drawn
  // last again.
  if (chance(0.25)) {
    Fault f{chance(0.7) ? Fault::Kind::relay_crash : Fault::Kind::relay_stop, milliseconds(uniform(0, 5000)),
            milliseconds(uniform(10, 2000))};
    f.moment = static_cast<SinkEvent>(uniform(1, 3) - 1);
    s.faults.push_back(f);
  }
  // A run of malformed rows longer than the smallest cap in one transaction (issue 37: D9), drawn
  // last again.
  if (chance(0.05) && s.max_in_flight_records == 20) s.poison_run = uniform(21, 60);
  // The checkpoint topic's ACL revoked (issue 37), drawn last again.
  if (chance(0.05)) {
    s.faults.push_back(
        Fault{Fault::Kind::checkpoint_refusal, milliseconds(uniform(0, 5000)), milliseconds(uniform(100, 3000))});
  }
  // A transaction.timeout.ms shorter than the longest Kafka outage (issue 37: the coordinator's
  // abort of a transaction that outlived it), drawn last again.
  // Not with transactions of thousands of rows: published one refused record at a time, one
  // can take longer than that, and is then aborted in every session (named, docs/operating.md
  // "Transaction timeout", but never done).
  if (chance(0.2) && s.huge == 0) s.transaction_timeout = milliseconds(uniform(3000, 8000));
  return s;
}

Schedule Schedule::with_faults(std::uint64_t mask) const {
  Schedule s = *this;
  s.faults.clear();
  for (std::size_t i = 0; i < faults.size(); ++i) {
    if ((mask >> i) & 1U) s.faults.push_back(faults[i]);
  }
  return s;
}

std::string Schedule::describe() const {
  std::string out = fmt::format(
      "seed {} ({}): {} transaction(s) of 1..{} rows{}{}{}, {} key(s); policy {}, max_retries {}, "
      "max_in_flight_records {}, checkpoint every {} ms, transaction_interval {} ms, send_when_caught_up {}, "
      "alternate_producers {}; producer queue {}, commit aborts {}{}",
      seed, delivery == config::Delivery::exactly_once ? "exactly-once" : "at-least-once", transactions, max_rows,
      huge > 0 ? ", some of thousands" : "",
      poison_run > 0 ? fmt::format(", poison rows, one transaction of {} malformed rows", poison_run)
      : poison > 0   ? ", poison rows"
                     : "",
      messages > 0 ? ", logical decoding messages" : "", keys,
      policy == config::PoisonPolicy::stop ? "stop" : "dead-letter", max_retries, max_in_flight_records,
      checkpoint_interval.count(), transaction_interval.count(), send_when_caught_up, alternate_producers,
      queue_bytes > 0 ? fmt::format("{} records or {} bytes", queue_capacity, queue_bytes)
                      : fmt::format("{} records", queue_capacity),
      commit_aborts, dead_letter_refuses ? ", the dead-letter topic refuses" : "");
  if (transaction_timeout != std::chrono::milliseconds(60'000))
    out += fmt::format(", transaction.timeout.ms {}", transaction_timeout.count());
  if (limits != std::array<std::size_t, 2>{kDefaultLimit, kDefaultLimit} || dead_letter_limit != kDefaultLimit ||
      lowered) {
    out += fmt::format("\n  max.message.bytes: outbox.event.A {}, outbox.event.B {}, dead-letter topic {}{}{}",
                       limits[0], limits[1], dead_letter_limit, oversized > 0 ? "; rows over their topic's limit" : "",
                       large > 0 ? "; rows over batch.size" : "");
  }
  if (lowered) {
    out += fmt::format("\n  at {} ms: outbox.event.{}'s max.message.bytes lowered to {}", lowered->at.count(),
                       kTypes[lowered->topic], lowered->bytes);
  }
  for (const auto& f : faults) {
    out += f.moment
               ? fmt::format("\n  on the {} from {} ms: {}", moment_name(*f.moment), f.at.count(), kind_name(f.kind))
               : fmt::format("\n  at {} ms: {}", f.at.count(), kind_name(f.kind));
    if (f.kind == Fault::Kind::snapshot_restore) {
      out += fmt::format(" (a snapshot taken {} ms before)", f.length.count());
    } else if (f.length.count() > 0) {
      out += fmt::format(" for {} ms", f.length.count());
    }
  }
  if (faults.empty()) out += "\n  no faults";
  return out;
}

std::string Schedule::replay_arguments() const {
  // The faults kept after shrinking are named by their index in the seed's own list.
  const auto full = from_seed(seed, delivery);
  std::uint64_t mask = 0;
  for (const auto& f : faults) {
    for (std::size_t i = 0; i < full.faults.size(); ++i) {
      if (full.faults[i].kind == f.kind && full.faults[i].at == f.at && full.faults[i].length == f.length &&
          full.faults[i].moment == f.moment)
        mask |= 1ULL << i;
    }
  }
  return fmt::format("--mode {} --seed {} --faults {} --transactions {}",
                     delivery == config::Delivery::exactly_once ? "exactly-once" : "at-least-once", seed, mask,
                     transactions);
}

Verdict simulate(const Schedule& schedule) { return Run(schedule).go(); }

void Campaign::add(const Campaign& later) {
  schedules += later.schedules;
  rows += later.rows;
  processes += later.processes;
  sessions += later.sessions;
  duplicates += later.duplicates;
  refused_before_sending += later.refused_before_sending;
  size_refusals += later.size_refusals;
  checkpoint_refusals += later.checkpoint_refusals;
  coordinator_aborts += later.coordinator_aborts;
  virtual_time += later.virtual_time;
  failed = later.failed;
  failure = later.failure;
}

Campaign run_campaign(config::Delivery delivery, std::uint64_t first_seed, std::uint64_t count) {
  Campaign c;
  for (std::uint64_t seed = first_seed; seed < first_seed + count; ++seed) {
    const auto schedule = Schedule::from_seed(seed, delivery);
    const auto verdict = simulate(schedule);
    ++c.schedules;
    c.rows += verdict.rows;
    c.processes += verdict.processes;
    c.sessions += verdict.sessions;
    c.duplicates += verdict.duplicates;
    c.refused_before_sending += verdict.refused_before_sending;
    c.size_refusals += verdict.size_refusals;
    c.checkpoint_refusals += verdict.checkpoint_refusals;
    c.coordinator_aborts += verdict.coordinator_aborts;
    c.virtual_time += verdict.virtual_time;
    if (!verdict.ok) {
      c.failed = shrink(schedule);
      c.failure = simulate(*c.failed);
      if (c.failure.ok) {  // cannot happen: a schedule replays exactly
        c.failed = schedule;
        c.failure = verdict;
      }
      break;
    }
  }
  return c;
}

std::string report(const Campaign& c) {
  std::string out = fmt::format(
      "{} schedule(s): {} row(s), {} process(es), {} session(s), {} duplicate(s) read, {} record(s) refused before "
      "sending, {} batch(es) refused for their size, {} exit(s) 24 for a refused checkpoint, {} transaction(s) the "
      "coordinator aborted for outliving transaction.timeout.ms, {} s of virtual time",
      c.schedules, c.rows, c.processes, c.sessions, c.duplicates, c.refused_before_sending, c.size_refusals,
      c.checkpoint_refusals, c.coordinator_aborts, c.virtual_time.count() / 1000);
  if (c.failed) {
    out += fmt::format("\nFAILED: {}\nminimal schedule: {}\nreplay: scripts/simulate.sh {}", c.failure.failure,
                       c.failed->describe(), c.failed->replay_arguments());
  }
  return out;
}

Schedule shrink(const Schedule& failing) {
  Schedule best = failing;
  bool smaller = true;
  while (smaller) {
    smaller = false;
    for (std::size_t i = 0; i < best.faults.size(); ++i) {
      auto candidate = best;
      candidate.faults.erase(candidate.faults.begin() + static_cast<std::ptrdiff_t>(i));
      if (!simulate(candidate).ok) {
        best = std::move(candidate);
        smaller = true;
        break;
      }
    }
    if (!smaller && best.transactions > 1) {
      auto candidate = best;
      candidate.transactions = best.transactions / 2;
      if (!simulate(candidate).ok) {
        best = std::move(candidate);
        smaller = true;
      }
    }
  }
  return best;
}

}  // namespace pgoutbox::sim
