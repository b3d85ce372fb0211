#include "pgoutbox/relay/relay.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include "checkpointer.h"
#include "pg_failure.h"
#include "pgoutbox/config/topic_template.h"
#include "pgoutbox/kafka/record_size.h"
#include "pgoutbox/pgoutput/decoder.h"

namespace pgoutbox::relay {

using namespace std::chrono_literals;

Relay::Relay(const config::Config& config, boost::asio::io_context& io, Clock& clock, kafka::SinkFactory sinks,
             Observer& observer, outbox::CatalogLookups catalog)
    : config_(config),
      io_(io),
      clock_(clock),
      sinks_(std::move(sinks)),
      observer_(observer),
      builder_(config, std::move(catalog)),
      compression_(kafka::producer_compression(config.kafka.properties)),
      poll_timer_(clock.timer()),
      stop_deadline_(clock.timer()) {}

Relay::~Relay() = default;

Outcome Relay::run(ChangeSource& source, SessionStart start) {
  start_ = std::move(start);
  if (!start_.refused_checkpoints) start_.refused_checkpoints = std::make_shared<RefusedCheckpoints>();
  if (start_.refused) prune_refused(*start_.refused, start_.slot_confirmed);
  // The slot is already confirmed up to here: a keepalive during catch-up, below it, must not
  // move it back (docs/spec.md I7).
  tracker_.idle_position(start_.slot_confirmed);
  reported_flush_ = tracker_.durable();
  source.set_flush(start_.slot_confirmed);
  DeliveryEvents& events = *this;
  checkpointer_ =
      std::make_unique<Checkpointer>(config_, io_, clock_, sinks_, start_, tracker_, counters_, observer_, events);
  path_ = make_delivery_path(PathContext{.config = config_,
                                         .io = io_,
                                         .clock = clock_,
                                         .sinks = sinks_,
                                         .tracker = tracker_,
                                         .counters = counters_,
                                         .observer = observer_,
                                         .events = *this,
                                         .checkpointer = *checkpointer_,
                                         .start = start_});
  auto outcome = stream(source);
  path_.reset();
  checkpointer_.reset();
  return outcome;
}

Outcome Relay::stream(ChangeSource& source) {
  if (auto refused = path_->open()) return *refused;
  Coverage covered;
  if (auto refused = checkpointer_->resume(proof_, covered)) return *refused;
  tracker_.resume_from(covered);
  source_ = &source;
  source.start(*this, [this](Outcome end) { outcome_ = pending_outcome_ ? *pending_outcome_ : std::move(end); });
  arm_poll();
  path_->started();
  observer_.session_started();
  try {
    io_.restart();
    while (!outcome_) clock_.run_one(io_);
  } catch (const std::exception& e) {
    outcome_ = Outcome::fatal(Fatal::internal, std::string("internal error: ") + e.what());
  }
  observer_.session_ended();
  if (!closing_) {
    // The stream ended by itself (the replication connection is gone): the path aborts what it
    // has open, and a fence it meets meanwhile ends the instance.
    closing_ = true;
    outcome_ = path_->close(std::move(*outcome_));
  }
  poll_timer_->cancel();
  stop_deadline_->cancel();
  source_ = nullptr;
  return *outcome_;
}

void Relay::stop() {
  if (stopping_ || source_ == nullptr || outcome_) return;
  stopping_ = true;
  spdlog::info("stopping: no more reading; waiting up to {} ms for {} outstanding record(s)",
               config_.shutdown_timeout.count(), tracker_.outstanding_records());
  update_reading();
  clock_.after(*stop_deadline_, config_.shutdown_timeout, [this] {
    if (tracker_.outstanding_records() == 0) {
      spdlog::warn("shutdown timeout: the final checkpoint was not acknowledged; every record was");
      finish(Outcome::stopped());
      return;
    }
    spdlog::warn("shutdown timeout: {} record(s) still unacknowledged; they will be sent again after a restart",
                 tracker_.outstanding_records());
    finish(Outcome::stopped_unacknowledged(
        fmt::format("shutdown timeout with {} record(s) unacknowledged", tracker_.outstanding_records())));
  });
  path_->stopping();
  maybe_finish_stop();
}

void Relay::fail(Outcome outcome) {
  if (source_ == nullptr || outcome_) return;
  finish(std::move(outcome));
}

void Relay::maybe_finish_stop() {
  if (!stopping_ || closing_ || tracker_.outstanding_records() != 0) return;
  if (!path_->drained()) return;  // what it still finishes reports changed()
  finish(Outcome::stopped());
}

void Relay::finish(Outcome outcome) {
  if (closing_) return;
  closing_ = true;
  stop_deadline_->cancel();
  outcome = path_->close(std::move(outcome));
  // Confirm exactly what is durable, then close cleanly. Nothing unacknowledged is ever
  // confirmed, whatever the reason for closing (I2).
  update_flush();
  pending_outcome_ = std::move(outcome);
  source_->stop();
}

// A safety net beside the producers' wake-up descriptors: serve them and notice fatal errors.
void Relay::arm_poll() {
  clock_.after(*poll_timer_, 200ms, [this] {
    if (outcome_) return;
    path_->poll();
    arm_poll();
  });
}

void Relay::update_flush() {
  if (source_ == nullptr) return;
  const Lsn durable = proof_.confirmable(tracker_.durable());
  if (durable != reported_flush_) {
    reported_flush_ = durable;
    observer_.confirmed_lsn(durable);
  }
  const auto now_us = wall_us();
  for (const auto& times : tracker_.take_confirmed_times()) observer_.transaction_stages(times, now_us);
  source_->set_flush(durable);
}

bool Relay::caps_reached() const {
  return tracker_.outstanding_records() >= config_.limits.max_in_flight_records ||
         in_flight_bytes_ >= config_.limits.max_in_flight_bytes;
}

// What reading should be now; the order of the checks is the order of precedence.
Relay::Paused Relay::wanted_pause() {
  const bool mid_unit = path_->whole_units() && tracker_.in_transaction();
  if (path_->queue_full()) return Paused::caps;
  if (stopping_) return mid_unit ? Paused::no : Paused::other;  // a whole unit is read to its end first
  if (path_->holds_stream()) return Paused::other;
  if (mid_unit) return Paused::no;
  if (caps_reached()) return Paused::caps;
  if (paused_ != Paused::caps) return Paused::no;
  const auto& limits = config_.limits;
  const bool below =
      static_cast<double>(tracker_.outstanding_records()) <=
          static_cast<double>(limits.max_in_flight_records) * limits.resume_ratio &&
      static_cast<double>(in_flight_bytes_) <= static_cast<double>(limits.max_in_flight_bytes) * limits.resume_ratio;
  if (below) return Paused::no;
  path_->reading_paused();
  return Paused::caps;
}

// Pauses or resumes reading (docs/spec.md I6). Backpressure (counted, and shown as paused):
// records wait for room in the producer's queue, or the in-flight caps are reached, until they
// fall to resume_ratio of the caps. Besides: a stop, and the path's own holds (a commit).
// Inside a Postgres transaction the caps cannot apply to a path that acknowledges whole
// transactions only: they are applied at its end.
void Relay::update_reading() {
  if (closing_ || source_ == nullptr) return;
  const Paused want = wanted_pause();
  if (want == Paused::caps && paused_ != Paused::caps) {
    ++counters_.pauses;
    observer_.paused(true);
  } else if (want != Paused::caps && paused_ == Paused::caps) {
    observer_.paused(false);
  }
  paused_ = want;
  if (want == Paused::no && source_->paused()) {
    source_->resume();
  } else if (want != Paused::no && !source_->paused()) {
    source_->pause();
  }
}

void Relay::completed(ConfirmTracker::TxnId unit, std::size_t weight) {
  tracker_.ack(unit, wall_us());
  in_flight_bytes_ -= std::min<std::uint64_t>(in_flight_bytes_, weight);
  observer_.in_flight(tracker_.outstanding_records(), in_flight_bytes_);
  if (closing_) return;
  update_flush();
  changed();
}

void Relay::sent(ConfirmTracker::TxnId unit) { tracker_.sent(unit, wall_us()); }

void Relay::lightened(std::size_t bytes) { in_flight_bytes_ -= std::min<std::uint64_t>(in_flight_bytes_, bytes); }

void Relay::changed() {
  if (closing_) return;
  update_reading();
  maybe_finish_stop();
}

void Relay::ended(Outcome outcome) { finish(std::move(outcome)); }

void Relay::on_keepalive(const replication::Keepalive& keepalive) {
  if (closing_ || other_history(proof_.on_position(keepalive.wal_end))) return;
  tracker_.idle_position(keepalive.wal_end);
  observer_.received_lsn(source_->received());  // follows keepalives too
  update_flush();
}

void Relay::on_data(const replication::XLogData& data) {
  if (closing_) return;
  observer_.received_lsn(source_->received());  // never a Relation's or Type's zero wal_end
  const auto decoded = pgoutput::decode(data.payload);
  if (!decoded) {
    finish(Outcome::fatal(Fatal::internal, "cannot decode the replication stream: " + decoded.error().to_string()));
    return;
  }
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, pgoutput::BeginData>) {
          on_begin(m, data.send_time);
        } else if constexpr (std::is_same_v<T, pgoutput::CommitData>) {
          on_commit(m);
        } else if constexpr (std::is_same_v<T, pgoutput::RelationData>) {
          builder_.relation(m);
          if (start_.relation_arrived) start_.relation_arrived();
        } else if constexpr (std::is_same_v<T, pgoutput::InsertData>) {
          on_insert(m);
        } else if constexpr (std::is_same_v<T, pgoutput::MessageData>) {
          on_message(m);
        } else if constexpr (std::is_same_v<T, pgoutput::UpdateData> || std::is_same_v<T, pgoutput::DeleteData> ||
                             std::is_same_v<T, pgoutput::TruncateData>) {
          ++counters_.changes_ignored;
        } else if constexpr (std::is_same_v<T, pgoutput::TypeData> || std::is_same_v<T, pgoutput::OriginData>) {
          // Descriptions only.
        } else {
          // Streaming and two-phase messages come only when asked for, and pgoutbox does not ask
          // (a two_phase slot is refused at start).
          const auto kind = static_cast<char>(data.payload[0]);  // decoded, so not empty
          throw std::logic_error(fmt::format("unexpected pgoutput message '{}' ({})", kind, pgoutput::kind_name(kind)));
        }
      },
      decoded.message());
}

void Relay::on_begin(const pgoutput::BeginData& begin, std::int64_t sent_time) {
  if (other_history(proof_.on_begin(begin.final_lsn, begin.xid))) return;
  const auto commit_time = pgoutput::to_unix_micros(begin.commit_time);
  const auto server_sent = sent_time > 0 ? pgoutput::to_unix_micros(sent_time) : 0;
  // The commit record starts at final_lsn; below the checkpoint, the whole transaction (which
  // ends before it) is in Kafka already (I10).
  unit_ = OpenUnit{.id = tracker_.begin(commit_time, begin.final_lsn, wall_us(), server_sent),
                   .context = {begin.final_lsn, commit_time, begin.xid},
                   .skipping = proof_.skips(begin.final_lsn)};
  if (!unit_->skipping && !skip_reported_ && counters_.checkpoint_skipped_transactions > 0) {
    skip_reported_ = true;
    spdlog::info("skipped {} transaction(s) ({} outbox row(s)) already in Kafka by the checkpoint at {}",
                 counters_.checkpoint_skipped_transactions, counters_.checkpoint_skipped_rows,
                 proof_.skip_below().to_string());
  }
}

void Relay::on_commit(const pgoutput::CommitData& commit) {
  if (!unit_) throw std::logic_error("Commit without Begin in the replication stream");
  const TransactionMark mark{unit_->context.xid, commit.commit_time, commit.end_lsn};
  if (other_history(proof_.on_commit(mark))) return;
  ++counters_.transactions;
  if (unit_->skipping) ++counters_.checkpoint_skipped_transactions;
  end_unit(commit.end_lsn, mark);
}

// The end of a unit the tracker confirms as a whole: a transaction at its Commit, or a
// non-transactional message (messages.cpp).
void Relay::end_unit(Lsn end_lsn, std::optional<TransactionMark> mark) {
  if (unit_->message) {
    tracker_.commit_message(unit_->id, end_lsn);
  } else {
    tracker_.commit(unit_->id, end_lsn, mark);
  }
  unit_.reset();
  update_flush();
  path_->unit_ended(caps_reached());
  update_reading();  // a stop may have waited for this end (DeliveryPath::whole_units)
}

void Relay::on_caught_up() {
  if (!closing_) path_->caught_up();
}

void Relay::on_insert(const pgoutput::InsertData& insert) {
  if (!unit_) throw std::logic_error(fmt::format("Insert for relid {} out of sequence", insert.relid));
  if (unit_->skipping) {
    ++counters_.checkpoint_skipped_rows;
    return;
  }
  std::optional<Built> built;
  try {
    built = builder_.row(insert, unit_->context);
  } catch (const outbox::MappingError& e) {
    finish(Outcome::fatal(Fatal::mapping, e.what()));
    return;
  } catch (const replication::PgError& e) {
    // The catalog could not say whose partition or child this relation is: nothing past it is
    // confirmed, and the next session asks again.
    finish(classify(e, SessionContext{.server_version = 0, .ever_streamed = true}));
    return;
  }
  if (!built) {
    ++counters_.rows_ignored;
    return;
  }
  ++counters_.rows_received;
  relay_built(std::move(*built));
}

void Relay::relay_built(Built built) {
  if (auto* poison = std::get_if<outbox::Poison>(&built.record)) {
    // A row (or message) that cannot become a record is handled by the policy at once: sending
    // it again would not change it. Like any record it is outstanding until handled (I2), and
    // counts in the caps (the simulator found one poison row after another reading past them).
    track(unit_->id, poison->record);
    path_->refuse(poison->record, unit_->id,
                  kafka::DeliveryError{.kind = kafka::DeliveryFailure::permanent,
                                       .code = poison->code,
                                       .text = fmt::format("{} ({})", poison->reason, built.from),
                                       .size_refusal = false});
  } else {
    const auto& record = std::get<outbox::Record>(built.record);
    track(unit_->id, record);
    observer_.event_received(record.table, record.topic);
    const kafka::TopicLimit* limit = start_.topic_limits ? &start_.topic_limits->of(record.topic) : nullptr;
    if (limit != nullptr && start_.batch_size > 0 &&
        kafka::batch_size_under(limit->max_message_bytes) < start_.batch_size) {
      // A batch of this session's producers could exceed the topic's limit: the next session's
      // keep under it (docs/spec.md I13). Nothing of this record was sent.
      finish(Outcome::restart(fmt::format(
          "topic {} takes batches of at most {} bytes (max.message.bytes), less than the producer's batch.size "
          "({}); the producer is rebuilt with its batches under it, and what was not acknowledged is published "
          "again",
          record.topic, limit->max_message_bytes, start_.batch_size)));
      return;
    }
    if (auto refusal = limit != nullptr ? kafka::predicted_refusal(record, *limit, compression_) : std::nullopt) {
      // Kafka would refuse it (and a batch holding it, and a Kafka transaction): poison.policy
      // applies at once, as to a row that cannot become a record.
      ++counters_.refused_before_sending;
      // predicted_refusal foresees two refusals only, and only a size refusal is marked so.
      observer_.event_refused_before_sending(
          record.table, record.topic,
          refusal->size_refusal ? RefusalReason::too_large : RefusalReason::null_key_compacted);
      path_->refuse(record, unit_->id, *refusal);
    } else {
      path_->deliver(record, unit_->id);
    }
  }
  update_reading();
}

void Relay::track(ConfirmTracker::TxnId unit, const outbox::Record& record) {
  tracker_.add_record(unit);
  in_flight_bytes_ += record.weight();
  ++counters_.records_produced;
  observer_.in_flight(tracker_.outstanding_records(), in_flight_bytes_);
}

// The stream is not the WAL history the trusted checkpoint was written over (SkipProof): nothing
// skipped was confirmed, so the session ends, and the next one, which no longer trusts it,
// publishes everything after the slot's position.
bool Relay::other_history(std::optional<std::string> why) {
  if (!why) return false;
  spdlog::error(
      "checkpoint: {}; it is refused for as long as this process runs, and the transactions after the "
      "slot's position {} are published again (nothing skipped was confirmed)",
      *why, start_.slot_confirmed.to_string());
  start_.refused_checkpoints->insert(*proof_.expected());
  observer_.checkpoints_refused(1);
  finish(Outcome::reconnect("the checkpoint was written over another WAL history: " + *why));
  return true;
}

}  // namespace pgoutbox::relay
