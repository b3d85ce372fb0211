#include "pgoutbox/relay/relay.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include "pg_failure.h"
#include "pgoutbox/config/topic_template.h"
#include "pgoutbox/pgoutput/decoder.h"

namespace pgoutbox::relay {

using namespace std::chrono_literals;

Relay::Relay(const config::Config& config, boost::asio::io_context& io, Clock& clock, kafka::SinkFactory sinks,
             Observer& observer, outbox::AncestryLookup ancestry)
    : config_(config),
      io_(io),
      clock_(clock),
      sinks_(std::move(sinks)),
      observer_(observer),
      rules_{config.poison, config.reconnect.max, 0},
      mapping_(config.tables, config.provenance_headers, std::move(ancestry)),
      messages_(config.messages, config.provenance_headers),
      reserved_topics_(config::reserved_topics(config)),
      poll_timer_(clock.timer()),
      stop_deadline_(clock.timer()),
      retry_timer_(clock.timer()),
      queue_full_timer_(clock.timer()),
      pump_timer_(clock.timer()),
      checkpoint_timer_(clock.timer()),
      commit_timer_(clock.timer()) {
  if (!config.checkpoint.signing_key.empty()) checkpoint_key_.emplace(config.checkpoint.signing_key);
}

Relay::~Relay() {
  for (auto* slot : {&main_, &isolated_, &checkpoint_sink_}) {
    boost::system::error_code ignored;
    if (slot->wakeup) slot->wakeup->close(ignored);
  }
}

Outcome Relay::run(ChangeSource& source, SessionStart start) {
  start_ = std::move(start);
  eos_ = config_.delivery == config::Delivery::exactly_once;
  refused_ = start_.refused ? start_.refused : std::make_shared<RefusedRecords>();
  if (!start_.refused_checkpoints) start_.refused_checkpoints = std::make_shared<RefusedCheckpoints>();
  // The slot is already confirmed up to here: a keepalive during catch-up, below it, must not
  // move it back (docs/spec.md I7).
  tracker_.idle_position(start_.slot_confirmed);
  reported_flush_ = tracker_.durable();
  source.set_flush(start_.slot_confirmed);
  try {
    open_sink(main_, false);
  } catch (const std::invalid_argument& e) {
    return Outcome::fatal(Fatal::kafka_config, e.what());
  }
  if (eos_) {
    // Fences every older producer of this transactional id (a paused instance that the slot's
    // new holder replaced) and aborts the transaction it left open.
    const auto init = main_.sink->init_transactions(std::chrono::seconds(30));
    if (init.status == kafka::TxnStatus::fenced || init.status == kafka::TxnStatus::fatal ||
        init.status == kafka::TxnStatus::abort || init.status == kafka::TxnStatus::retry) {
      return Outcome::reconnect(fmt::format("initialising Kafka transactions (transactional.id {}) failed: {}",
                                            start_.transactional_id, init.message));
    }
    spdlog::info("exactly-once: Kafka transactions with transactional.id {}", start_.transactional_id);
  }
  if (auto refused = resume_from_checkpoint()) return *refused;
  source_ = &source;
  source.start(*this, [this](Outcome end) { outcome_ = pending_outcome_ ? *pending_outcome_ : std::move(end); });
  arm_poll();
  if (checkpointing_ && !eos_) arm_checkpoint();
  observer_.session_started();
  try {
    io_.restart();
    while (!outcome_) clock_.run_one(io_);
  } catch (const std::exception& e) {
    outcome_ = Outcome::fatal(Fatal::internal, std::string("internal error: ") + e.what());
  }
  observer_.session_ended();
  if (eos_ && !closing_) {
    // The stream ended by itself (the replication connection is gone): the open Kafka
    // transaction is aborted here, and a fence that abort or librdkafka meets ends the instance.
    closing_ = true;
    if (kafka_txn_open_) abort_kafka_transaction("the replication stream ended");
    if (outcome_->kind != Outcome::Kind::fatal) {
      if (auto fence = fence_shown()) outcome_ = std::move(*fence);
    }
  }
  for (auto* timer : {&poll_timer_, &stop_deadline_, &retry_timer_, &queue_full_timer_, &pump_timer_,
                      &checkpoint_timer_, &commit_timer_})
    (*timer)->cancel();
  pump_armed_ = false;
  for (auto* slot : {&main_, &isolated_, &checkpoint_sink_}) {
    if (slot->wakeup) slot->wakeup->cancel();
  }
  source_ = nullptr;
  return *outcome_;
}

void Relay::stop() {
  if (stopping_ || source_ == nullptr || outcome_) return;
  stopping_ = true;
  spdlog::info("stopping: no more reading; waiting up to {} ms for {} outstanding record(s)",
               config_.shutdown_timeout.count(), tracker_.outstanding_records());
  // Exactly-once: a Postgres transaction is never split across Kafka transactions, so one half
  // read is read to its end, then committed with the rest.
  if (!eos_ || !tracker_.in_transaction()) source_->pause();
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
  if (eos_ && !tracker_.in_transaction()) maybe_commit(true);
  maybe_finish_stop();
}

void Relay::fail(Outcome outcome) {
  if (source_ == nullptr || outcome_) return;
  finish(std::move(outcome));
}

std::optional<std::int64_t> Relay::newest_row_commit(std::string_view label) const {
  const auto it = newest_row_commit_.find(label);
  if (it == newest_row_commit_.end()) return std::nullopt;
  return it->second;
}

void Relay::maybe_finish_stop() {
  if (!stopping_ || closing_ || tracker_.outstanding_records() != 0 || committing_) return;
  if (final_checkpoint_pending()) return;  // its report finishes the stop
  finish(Outcome::stopped());
}

void Relay::finish(Outcome outcome) {
  if (closing_) return;
  closing_ = true;
  stop_deadline_->cancel();
  if (eos_ && kafka_txn_open_) abort_kafka_transaction("the session is closing");
  // Whatever ends the session (a lost replication connection, say), a producer the abort or
  // librdkafka found fenced ends the instance: a reconnect would wait as a standby, silent.
  if (eos_ && outcome.kind != Outcome::Kind::fatal) {
    if (auto fence = fence_shown()) outcome = std::move(*fence);
  }
  // Confirm exactly what is durable, then close cleanly. Nothing unacknowledged is ever
  // confirmed, whatever the reason for closing (I2).
  update_flush();
  pending_outcome_ = std::move(outcome);
  source_->stop();
}

void Relay::update_flush() {
  if (source_ == nullptr) return;
  const Lsn durable = proof_.confirmable(tracker_.durable());
  if (durable != reported_flush_) {
    reported_flush_ = durable;
    observer_.confirmed_lsn(durable);
  }
  source_->set_flush(durable);
}

void Relay::apply_backpressure() {
  const auto& limits = config_.limits;
  const auto records = tracker_.outstanding_records();
  const bool full = records >= limits.max_in_flight_records || in_flight_bytes_ >= limits.max_in_flight_bytes;
  if (eos_ && committing_) return;  // a commit pauses reading itself, and resumes it
  if (eos_ && tracker_.in_transaction()) {
    // Records wait for the commit of their Kafka transaction, which comes only after the end of
    // a Postgres transaction: inside one the caps cannot apply (a full cap commits at the next
    // boundary instead, maybe_commit). Only the producer's queue pauses reading there, while it
    // has no room; it empties as the broker acknowledges, and reading goes on (issue 24 item 2).
    if (!source_->paused() && !blocked_.empty()) {
      source_->pause();
      ++counters_.pauses;
      observer_.paused(true);
    } else if (source_->paused() && blocked_.empty() && !stopping_ && !closing_) {
      source_->resume();
      observer_.paused(false);
    }
    return;
  }
  if (!source_->paused()) {
    if (full || !blocked_.empty()) {
      source_->pause();
      ++counters_.pauses;
      observer_.paused(true);
    }
    return;
  }
  if (stopping_ || closing_ || !blocked_.empty()) return;
  if (static_cast<double>(records) <= static_cast<double>(limits.max_in_flight_records) * limits.resume_ratio &&
      static_cast<double>(in_flight_bytes_) <= static_cast<double>(limits.max_in_flight_bytes) * limits.resume_ratio) {
    source_->resume();
    observer_.paused(false);
    return;
  }
  // Exactly-once, paused between transactions (the producer's queue was full at the end of one,
  // and more is outstanding than the caps resume at): only a commit acknowledges those records,
  // and a paused stream brings no boundary that would start it. The simulator found this stall.
  if (eos_ && kafka_txn_open_ && !committing_) {
    boost::asio::post(io_, [this] { maybe_commit(true); });
  }
}

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
          on_begin(m);
        } else if constexpr (std::is_same_v<T, pgoutput::CommitData>) {
          on_commit(m);
        } else if constexpr (std::is_same_v<T, pgoutput::RelationData>) {
          relations_.apply(m);
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

void Relay::on_begin(const pgoutput::BeginData& begin) {
  if (other_history(proof_.on_begin(begin.final_lsn, begin.xid))) return;
  txn_ = tracker_.begin(pgoutput::to_unix_micros(begin.commit_time), begin.final_lsn);
  txn_context_ = {begin.final_lsn, pgoutput::to_unix_micros(begin.commit_time), begin.xid};
  // The commit record starts at final_lsn; below the checkpoint, the whole transaction (which
  // ends before it) is in Kafka already (I10).
  skipping_ = proof_.skips(begin.final_lsn);
  if (!skipping_ && !skip_reported_ && counters_.checkpoint_skipped_transactions > 0) {
    skip_reported_ = true;
    spdlog::info("skipped {} transaction(s) ({} outbox row(s)) already in Kafka by the checkpoint at {}",
                 counters_.checkpoint_skipped_transactions, counters_.checkpoint_skipped_rows,
                 proof_.skip_below().to_string());
  }
}

void Relay::on_commit(const pgoutput::CommitData& commit) {
  if (!txn_) throw std::logic_error("Commit without Begin in the replication stream");
  const TransactionMark mark{txn_context_.xid, commit.commit_time, commit.end_lsn};
  if (other_history(proof_.on_commit(mark))) return;
  ++counters_.transactions;
  if (skipping_) ++counters_.checkpoint_skipped_transactions;
  end_unit(commit.end_lsn, mark);
}

// The end of a unit the tracker confirms as a whole: a transaction at its Commit, or a
// non-transactional message (messages.cpp).
void Relay::end_unit(Lsn end_lsn, std::optional<TransactionMark> mark) {
  tracker_.commit(*txn_, end_lsn, mark);
  txn_.reset();
  skipping_ = false;
  update_flush();
  if (!eos_) return;
  if (stopping_) {
    source_->pause();  // the transaction read to its end at stop(): nothing more
    maybe_commit(true);
    return;
  }
  maybe_commit(false);
}

void Relay::on_caught_up() {
  if (closing_) return;
  if (eos_) {
    maybe_commit(true);
  } else if (config_.kafka.send_when_caught_up) {
    // Posted: it may serve delivery reports, which is for a handler of its own, not the stream's.
    boost::asio::post(io_, [this] {
      if (!closing_ && main_.sink) main_.sink->send_now();
    });
  }
}

void Relay::on_insert(const pgoutput::InsertData& insert) {
  const auto* relation = relations_.find(insert.relid);
  if (relation == nullptr || !txn_)
    throw std::logic_error(fmt::format("Insert for relid {} out of sequence", insert.relid));
  if (skipping_) {
    ++counters_.checkpoint_skipped_rows;
    return;
  }
  const outbox::ResolvedTable* table = nullptr;
  try {
    table = mapping_.resolve(*relation);
  } catch (const outbox::MappingError& e) {
    finish(Outcome::fatal(Fatal::mapping, e.what()));
    return;
  } catch (const replication::PgError& e) {
    // The catalog could not say whose partition or child this relation is: nothing past it is
    // confirmed, and the next session asks again.
    finish(classify(replication::PgError(fmt::format("looking up the ancestry of relation {}.{}: {}", relation->nspname,
                                                     relation->relname, e.what()),
                                         e.sqlstate()),
                    SessionContext{.server_version = 0, .ever_streamed = true}));
    return;
  }
  if (table == nullptr) {
    ++counters_.rows_ignored;
    return;
  }
  ++counters_.rows_received;
  auto& newest = newest_row_commit_[table->label()];
  newest = std::max(newest, txn_context_.commit_time_unix_us);
  relay_built(table->build(insert.new_tuple, txn_context_),
              fmt::format("table {}.{}", relation->nspname, relation->relname));
}

void Relay::relay_built(std::variant<outbox::Record, outbox::Poison> built, const std::string& from) {
  if (auto* record = std::get_if<outbox::Record>(&built); record != nullptr && reserved_topic(record->topic)) {
    // A row must not pass for pgoutbox's own records (docs/spec.md I11); refused at load where
    // the template shows it can, and here whatever the template.
    std::string reason = fmt::format(
        "the topic \"{}\" is reserved for pgoutbox's own records (checkpoint.topic, poison.dead_letter_topic)",
        record->topic);
    record->topic.clear();
    built = outbox::Poison{record->event_id, std::move(reason), "RESERVED_TOPIC", std::move(*record)};
  }
  if (!extra_headers_.empty()) {
    auto* poisoned = std::get_if<outbox::Poison>(&built);
    auto& headers = poisoned != nullptr ? poisoned->record.headers : std::get<outbox::Record>(built).headers;
    headers.insert(headers.end(), extra_headers_.begin(), extra_headers_.end());
  }
  if (auto* poison = std::get_if<outbox::Poison>(&built)) {
    // A row (or message) that cannot become a record is handled by the policy at once: sending
    // it again would not change it. Like any record it is outstanding until handled (I2).
    track(*txn_, poison->record);
    const kafka::DeliveryError error{.kind = kafka::DeliveryFailure::permanent,
                                     .code = poison->code,
                                     .text = fmt::format("{} ({})", poison->reason, from),
                                     .size_refusal = false};
    apply_policy(poison->record, *txn_, error, 0);
    // It counts in the caps like any record: one poison row after another read on past them
    // (found by the simulator, at-least-once seed 186330: 21 in flight under a cap of 20).
    if (!closing_) apply_backpressure();
    return;
  }
  const auto& record = std::get<outbox::Record>(built);
  track(*txn_, record);
  observer_.event_received(record.table, record.topic);
  if (eos_) {
    // Kafka refused it in an earlier session's transaction: retried, then the policy (I8).
    if (const auto* refused = refused_before(record, *txn_)) {
      if (refused->attempts > config_.poison.max_retries) {
        apply_policy(record, *txn_, refused->error, refused->attempts);
        return;
      }
      send_alone_in_transaction(record, DeliveryCookie::alone(*txn_, refused->attempts));
      apply_backpressure();
      return;
    }
  }
  send(record, DeliveryCookie::batched(*txn_));
  apply_backpressure();
}

bool Relay::reserved_topic(std::string_view topic) const {
  return std::find(reserved_topics_.begin(), reserved_topics_.end(), topic) != reserved_topics_.end();
}

void Relay::track(ConfirmTracker::TxnId txn, const outbox::Record& record) {
  tracker_.add_record(txn);
  in_flight_bytes_ += record.weight();
  ++counters_.records_produced;
  observer_.in_flight(tracker_.outstanding_records(), in_flight_bytes_);
}

void Relay::complete(ConfirmTracker::TxnId txn, std::size_t weight) {
  tracker_.ack(txn);
  in_flight_bytes_ -= std::min<std::uint64_t>(in_flight_bytes_, weight);
  observer_.in_flight(tracker_.outstanding_records(), in_flight_bytes_);
  if (closing_) return;
  update_flush();
  apply_backpressure();
  maybe_finish_stop();
}

}  // namespace pgoutbox::relay
