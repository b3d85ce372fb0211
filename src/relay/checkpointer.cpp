// The durable checkpoint (docs/spec.md I10): read back at the start of a session to skip what
// Kafka already has, and written as the confirmed position advances. In at-least-once mode it
// goes through a sink of its own, at most every checkpoint.interval and once more at a graceful
// stop; in exactly-once mode it is the last record of each Kafka transaction (transactions.cpp).
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "pgoutbox/relay/checkpoint_trust.h"
#include "pgoutbox/relay/relay.h"

namespace pgoutbox::relay {

std::optional<Outcome> Relay::resume_from_checkpoint() {
  if (!config_.checkpoint.enabled || !start_.read_checkpoints) return std::nullopt;
  kafka::CheckpointScan scan;
  try {
    scan = start_.read_checkpoints();
  } catch (const std::exception& e) {
    if (eos_) return Outcome::reconnect(fmt::format("reading the checkpoint failed: {}", e.what()));
    // At-least-once does not need it: without it, a crash only publishes more again.
    spdlog::warn("checkpoint: cannot read it ({}); nothing is skipped this session", e.what());
    return std::nullopt;
  }
  const auto resume = trust_checkpoint(scan, ResumeFacts{.identity = start_.identity,
                                                         .timeline = start_.timeline,
                                                         .slot_confirmed = start_.slot_confirmed,
                                                         .server_position = start_.server_position,
                                                         .delivery = config_.delivery,
                                                         .transactional_id = start_.transactional_id,
                                                         .signing = checkpoint_key_.has_value(),
                                                         .refused = start_.refused_checkpoints.get()});
  for (const auto& warning : resume.warnings) spdlog::warn("checkpoint: {}", warning);
  if (resume.refused_records > 0) observer_.checkpoints_refused(resume.refused_records);
  if (resume.refused) return resume.refused;
  if (!resume.note.empty()) spdlog::info("checkpoint: {}", resume.note);
  if (resume.skip_through) proof_ = SkipProof(*resume.skip_through, start_.slot_confirmed);
  // Nothing at or below it is written again; nothing past it comes before the proof (SkipProof).
  checkpoint_written_ = std::max(resume.skip_below(), start_.slot_confirmed);
  checkpointing_ = true;
  return std::nullopt;
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

kafka::Checkpoint Relay::checkpoint_at(const TransactionMark& last) const {
  auto checkpoint = kafka::checkpoint_of(start_.identity, last);
  checkpoint.timeline = start_.timeline;
  checkpoint.delivery = eos_ ? "exactly-once" : "at-least-once";
  checkpoint.transactional_id = start_.transactional_id;
  if (checkpoint_key_) checkpoint_key_->sign(checkpoint);
  return checkpoint;
}

void Relay::arm_checkpoint() {
  clock_.after(*checkpoint_timer_, config_.checkpoint.interval, [this] {
    if (closing_) return;
    write_checkpoint();
    arm_checkpoint();
  });
}

// Writes the newest transaction of the confirmed position: everything up to it is acknowledged,
// so the checkpoint never claims a record Kafka does not have. Not a keepalive's position past
// it: a transaction the checkpoint names is what the next session proves the history by. One
// write at a time.
void Relay::write_checkpoint() {
  const auto& durable = tracker_.durable_transaction();
  if (checkpoint_sending_ || !durable || durable->end_lsn <= checkpoint_written_) return;
  if (!checkpoint_sink_.sink) {
    kafka::SinkOptions options;
    options.isolated = true;
    options.on_delivery = [this](const kafka::Delivery& d) { on_checkpoint_delivery(d); };
    checkpoint_sink_.sink = sinks_(std::move(options));
    checkpoint_sink_.wakeup.emplace(io_, ::dup(checkpoint_sink_.sink->wakeup_fd()));
    wait_wakeup(checkpoint_sink_);
  }
  kafka::DeliveryError error;
  const auto record = kafka::checkpoint_record(config_.checkpoint.topic, checkpoint_at(*durable));
  const auto produced = checkpoint_sink_.sink->produce(record, DeliveryCookie::checkpoint().pack(), error);
  if (produced == kafka::Sink::Produced::ok) {
    checkpoint_sending_ = durable->end_lsn;
  } else if (produced == kafka::Sink::Produced::failed) {
    spdlog::warn("checkpoint: Kafka refused it ({}: {}); trying again in {} ms", error.code, error.text,
                 config_.checkpoint.interval.count());
  }
}

void Relay::on_checkpoint_delivery(const kafka::Delivery& delivery) {
  const auto written = checkpoint_sending_;
  checkpoint_sending_.reset();
  if (delivery.error) {
    spdlog::warn("checkpoint: writing it to {} failed ({}: {}); {}", config_.checkpoint.topic, delivery.error->code,
                 delivery.error->text, stopping_ ? "stopping without it" : "trying again");
    if (stopping_) checkpointing_ = false;  // one try at a stop: the records are all acknowledged
  } else if (written) {
    checkpoint_written_ = std::max(checkpoint_written_, *written);
    ++counters_.checkpoints_written;
  }
  maybe_finish_stop();
}

// At a graceful stop in at-least-once mode, once every record is acknowledged: the newest
// confirmed position is written before the session closes (true while that write is pending).
bool Relay::final_checkpoint_pending() {
  if (!checkpointing_ || eos_ || closing_) return false;
  if (checkpoint_sending_) return true;
  const auto& durable = tracker_.durable_transaction();
  if (!durable || durable->end_lsn <= checkpoint_written_) return false;
  write_checkpoint();
  return checkpoint_sending_.has_value();
}

}  // namespace pgoutbox::relay
