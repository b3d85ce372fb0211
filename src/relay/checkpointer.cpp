#include "checkpointer.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "pgoutbox/config/transactional_id.h"
#include "pgoutbox/relay/checkpoint_trust.h"
#include "pgoutbox/relay/delivery_cookie.h"

namespace pgoutbox::relay {

bool refused_for_good(const kafka::DeliveryError& error) {
  return error.kind == kafka::DeliveryFailure::permanent && error.code != "UNKNOWN_TOPIC_OR_PART" &&
         error.code != "_UNKNOWN_TOPIC" && error.code != "_UNKNOWN_PARTITION";
}

Outcome checkpoint_refused(const config::Config& config, const kafka::DeliveryError& error) {
  const auto& topic = config.checkpoint.topic;
  std::string fix;
  if (error.code == "TOPIC_AUTHORIZATION_FAILED") {
    fix = fmt::format(
        "grant pgoutbox's principal WRITE, READ and DESCRIBE on topic {} (kafka-acls.sh --add --allow-principal "
        "User:<name> --operation Write --operation Read --operation Describe --topic {})",
        topic, topic);
  } else if (error.size_refusal) {
    fix = fmt::format(
        "raise the topic's limit (kafka-configs.sh --alter --entity-type topics --entity-name {} --add-config "
        "max.message.bytes=1048588), or give the slot a checkpoint.topic of its own with Kafka's defaults",
        topic);
  } else {
    fix = fmt::format(
        "make topic {} accept pgoutbox's writes (pgoutbox check -c FILE reads it), or set "
        "checkpoint.topic to one that does",
        topic);
  }
  return Outcome::fatal(Fatal::checkpoint_refused,
                        fmt::format("the checkpoint topic {} refuses pgoutbox's checkpoint ({}: {}); {}. Fix: {}",
                                    topic, error.code, error.text,
                                    config.delivery == config::Delivery::exactly_once
                                        ? "no Kafka transaction can commit without it"
                                        : "without it a Postgres crash publishes everything since the slot's last "
                                          "persisted position again",
                                    fix));
}

Checkpointer::Checkpointer(const config::Config& config, boost::asio::io_context& io, Clock& clock,
                           const kafka::SinkFactory& sinks, const SessionStart& start, const ConfirmTracker& tracker,
                           Counters& counters, Observer& observer, DeliveryEvents& events)
    : config_(config),
      io_(io),
      clock_(clock),
      sinks_(sinks),
      start_(start),
      tracker_(tracker),
      counters_(counters),
      observer_(observer),
      events_(events),
      timer_(clock.timer()) {
  if (!config.checkpoint.signing_key.empty()) key_.emplace(config.checkpoint.signing_key);
}

std::optional<Outcome> Checkpointer::resume(SkipProof& proof, Coverage& covered) {
  if (!config_.checkpoint.enabled || !start_.read_checkpoints) return std::nullopt;
  kafka::CheckpointScan scan;
  try {
    scan = start_.read_checkpoints();
  } catch (const std::exception& e) {
    if (config_.delivery == config::Delivery::exactly_once)
      return Outcome::reconnect(fmt::format("reading the checkpoint failed: {}", e.what()));
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
                                                         .legacy_transactional_id = legacy_transactional_id(),
                                                         .checkpoint_topic = config_.checkpoint.topic,
                                                         .signing = key_.has_value(),
                                                         .refused = start_.refused_checkpoints.get(),
                                                         .slot_created = start_.slot_created,
                                                         .accept_lost_checkpoint = config_.checkpoint.accept_lost});
  for (const auto& warning : resume.warnings) spdlog::warn("checkpoint: {}", warning);
  if (resume.refused_records > 0) observer_.checkpoints_refused(resume.refused_records);
  if (resume.topic_lost) observer_.checkpoint_topic_lost();
  if (resume.refused) return resume.refused;
  if (!resume.note.empty()) spdlog::info("checkpoint: {}", resume.note);
  if (resume.skip_below != Lsn{}) proof = SkipProof(resume.covered, start_.slot_confirmed);
  covered = resume.covered;
  // Nothing at or below it is written again; nothing past it comes before the proof (SkipProof).
  last_written_ = std::max(resume.skip_below, start_.slot_confirmed);
  active_ = true;
  return std::nullopt;
}

std::string Checkpointer::legacy_transactional_id() const {
  if (config_.delivery != config::Delivery::exactly_once || !config_.kafka.transactional_id.empty()) return {};
  const auto& slot = start_.identity;
  return config::legacy_transactional_id(slot.system_id, slot.database, slot.slot);
}

outbox::Record Checkpointer::record(const Coverage& covered) const {
  auto checkpoint = kafka::checkpoint_of(start_.identity, covered);
  checkpoint.timeline = start_.timeline;
  checkpoint.delivery = config_.delivery == config::Delivery::exactly_once ? "exactly-once" : "at-least-once";
  checkpoint.transactional_id = start_.transactional_id;
  if (key_) key_->sign(checkpoint);
  return kafka::checkpoint_record(config_.checkpoint.topic, checkpoint);
}

void Checkpointer::write_periodically(std::function<void()> written) {
  if (!active_ || !start_.write_checkpoints) return;
  written_ = std::move(written);
  arm();
}

void Checkpointer::close() {
  closed_ = true;
  timer_->cancel();
}

void Checkpointer::arm() {
  clock_.after(*timer_, config_.checkpoint.interval, [this] {
    if (closed_) return;
    write();
    arm();
  });
}

// Writes what the confirmed position covers: everything up to it is acknowledged, so the
// checkpoint never claims a record Kafka does not have. Not a keepalive's position past it: a
// transaction the checkpoint names is what the next session proves the history by. One write at
// a time.
void Checkpointer::write() {
  const auto& durable = tracker_.durable_coverage();
  if (sending_ || durable.end() <= last_written_) return;
  if (!sink_.is_open()) {
    kafka::SinkOptions options;
    options.isolated = true;
    options.on_delivery = [this](const kafka::Delivery& d) { on_delivery(d); };
    sink_.open(io_, sinks_(std::move(options)));
  }
  kafka::DeliveryError error;
  const auto produced = sink_->produce(record(durable), DeliveryCookie::checkpoint().pack(), error);
  if (produced == kafka::Sink::Produced::ok) {
    sending_ = durable.end();
  } else if (produced == kafka::Sink::Produced::failed) {
    if (refused_for_good(error)) {
      events_.ended(checkpoint_refused(config_, error));
      return;
    }
    spdlog::warn("checkpoint: Kafka refused it ({}: {}); trying again in {} ms", error.code, error.text,
                 config_.checkpoint.interval.count());
  }
}

void Checkpointer::on_delivery(const kafka::Delivery& delivery) {
  const auto written = sending_;
  sending_.reset();
  if (delivery.error && refused_for_good(*delivery.error) && !stopping_) {
    events_.ended(checkpoint_refused(config_, *delivery.error));
    return;
  }
  if (delivery.error) {
    spdlog::warn("checkpoint: writing it to {} failed ({}: {}); {}", config_.checkpoint.topic, delivery.error->code,
                 delivery.error->text, stopping_ ? "stopping without it" : "trying again");
    if (stopping_) active_ = false;  // one try at a stop: the records are all acknowledged
  } else if (written) {
    last_written_ = std::max(last_written_, *written);
    ++counters_.checkpoints_written;
  }
  if (written_) written_();
}

bool Checkpointer::final_pending() {
  if (!active_ || closed_ || !written_) return false;
  if (sending_) return true;
  if (tracker_.durable_coverage().end() <= last_written_) return false;
  write();
  return sending_.has_value();
}

}  // namespace pgoutbox::relay
