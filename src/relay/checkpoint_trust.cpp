#include "pgoutbox/relay/checkpoint_trust.h"

#include <fmt/format.h>

namespace pgoutbox::relay {

namespace {

const char* delivery_name(config::Delivery delivery) {
  return delivery == config::Delivery::exactly_once ? "exactly-once" : "at-least-once";
}

// Why a checkpoint of this slot does not describe this instance; empty when it does.
std::string disagreement(const kafka::Checkpoint& c, const ResumeFacts& facts) {
  if (c.slot.key() != facts.identity.key())
    return fmt::format("it names {}, this instance is {}", c.slot.key(), facts.identity.key());
  if (c.delivery != delivery_name(facts.delivery))
    return fmt::format("it was written in {} mode, this instance runs {}", c.delivery, delivery_name(facts.delivery));
  if (c.transactional_id != facts.transactional_id &&
      (facts.legacy_transactional_id.empty() || c.transactional_id != facts.legacy_transactional_id))
    return fmt::format("it was written by transactional id \"{}\", this instance uses \"{}\"", c.transactional_id,
                       facts.transactional_id);
  return {};
}

// A slot that existed before this start whose checkpoints are lost (docs/operating.md, exit
// 25): exactly-once would publish again what Kafka holds, so it refuses with `refusal` unless the
// operator accepts that once; at-least-once warns. True when it refused.
bool refuse_lost_checkpoint(Resume& resume, const ResumeFacts& facts, const std::string& what, std::string refusal) {
  if (facts.delivery == config::Delivery::exactly_once && !facts.accept_lost_checkpoint) {
    resume.refused = Outcome::fatal(Fatal::checkpoint_lost, std::move(refusal));
    return true;
  }
  resume.warnings.push_back(fmt::format("{}: events after the slot's position {} may be published again", what,
                                        facts.slot_confirmed.to_string()));
  return false;
}

}  // namespace

Resume trust_checkpoint(const kafka::CheckpointScan& scan, const ResumeFacts& facts) {
  Resume resume;
  if (!scan.unfit.empty()) {
    // Exactly-once's 0 duplicates rest on the newest checkpoint: a topic that may lose it, or
    // hold two of a slot's in no order, is refused before anything relies on it.
    if (facts.delivery == config::Delivery::exactly_once) {
      resume.refused =
          Outcome::fatal(Fatal::checkpoint_refused, fmt::format("{}; exactly-once cannot rely on it", scan.unfit));
      return resume;
    }
    resume.warnings.push_back(
        fmt::format("{}; at-least-once goes on, and after a crash may publish more again than the checkpoint "
                    "would have allowed",
                    scan.unfit));
  }
  if (!scan.warning.empty()) resume.warnings.push_back(scan.warning);
  resume.refused_records = scan.refused_count;
  if (scan.refused_count > scan.refused.size()) {
    resume.warnings.push_back(
        fmt::format("checkpoint topic: {} record(s) under this slot's key refused; the newest {}:", scan.refused_count,
                    scan.refused.size()));
  }
  for (const auto& r : scan.refused) {
    resume.warnings.push_back(fmt::format(
        "checkpoint topic: the record at partition {} offset {} under this slot's key is refused: {}. It is not "
        "used; if pgoutbox did not write it, find who can write to the checkpoint topic",
        r.partition, r.offset, r.reason));
  }
  for (const auto& other : scan.other_systems) {
    resume.warnings.push_back(fmt::format(
        "checkpoint topic holds a checkpoint of slot {} in database {} from another system ({}, this one is {}): "
        "a recreated cluster or a copy of the database; it is not used",
        other.slot.slot, other.slot.database, other.slot.system_id, facts.identity.system_id));
  }
  if (facts.delivery == config::Delivery::exactly_once && facts.signing && !scan.same_transactional_id.empty()) {
    const auto& other = scan.same_transactional_id.front();
    resume.refused = Outcome::fatal(
        Fatal::kafka_config,
        fmt::format("kafka.transactional_id {} is also used by slot {} of database {} (system {}): two slots "
                    "sharing one transactional id fence each other. Fix: give each configuration its own "
                    "kafka.transactional_id (or leave it empty to derive it from the slot)",
                    facts.transactional_id, other.slot.slot, other.slot.database, other.slot.system_id));
    return resume;
  }
  if (!scan.hidden.empty()) {
    if (facts.delivery == config::Delivery::exactly_once) {
      // An older checkpoint would publish again transactions whose Kafka transactions committed,
      // which a read_committed consumer would see twice.
      resume.refused = Outcome::fatal(
          Fatal::checkpoint_hidden,
          fmt::format("exactly-once cannot start without this slot's newest checkpoint: {}. Fix: start again once "
                      "the transaction coordinator has aborted that transaction (after the transaction.timeout.ms of "
                      "the producer that opened it; start that instance again to abort it at once), and give each "
                      "slot's instances a checkpoint.topic of their own so one cannot hide another's. A transaction "
                      "still open after this wait is one the coordinator does not know (kafka-transactions.sh list "
                      "shows its producer's id Empty or complete; a broker restart can leave such a hanging "
                      "transaction) and will never end by itself: abort it with kafka-transactions.sh "
                      "--bootstrap-server BROKERS abort --topic {} --partition {} --start-offset {}",
                      scan.hidden, facts.checkpoint_topic, scan.hidden_partition, scan.hidden_offset));
      return resume;
    }
    // At-least-once: every checkpoint of this slot claims only what Kafka acknowledged, so an
    // older one skips less; only duplicates can follow.
    resume.warnings.push_back(fmt::format(
        "{}; the newest checkpoint before it is used, which covers less: after a Postgres crash more events may "
        "be published again",
        scan.hidden));
  }
  if (scan.topic_missing && !facts.slot_created) {
    // The slot existed before this start, and so did its checkpoints: the topic that held them is
    // gone (deleted, or another cluster). Without them exactly-once would publish again everything
    // after the slot's position that Kafka already holds.
    resume.topic_lost = true;
    const auto what = fmt::format(
        "checkpoint topic did not exist, though replication slot {} existed before this start: the topic that "
        "held its checkpoints is gone (deleted, or Kafka is another cluster)",
        facts.identity.slot);
    if (refuse_lost_checkpoint(
            resume, facts, what,
            fmt::format("exactly-once cannot start: {}, and the events after the slot's position {} that Kafka "
                        "already holds would be published again, which read_committed consumers would read twice. "
                        "Fix: point kafka.brokers and checkpoint.topic at the cluster and topic that hold them; or "
                        "accept the duplicates once with `pgoutbox run --accept-lost-checkpoint`; or drop the slot "
                        "(pgoutbox slot drop) so that a new one starts at the current position",
                        what, facts.slot_confirmed.to_string())))
      return resume;
  }
  if (!scan.mine && scan.refused_count > 0 && !facts.slot_created) {
    // Records under this slot's key, and none of them a checkpoint it can use: a tombstone or a
    // forgery after which compaction deleted the genuine checkpoint, or an unreadable one. The
    // slot existed before this start, so exactly-once would publish again what Kafka holds.
    const auto what = fmt::format(
        "the checkpoint topic holds {} record(s) under this slot's key and no checkpoint it can use (the newest at "
        "partition {} offset {}: {})",
        scan.refused_count, scan.refused.back().partition, scan.refused.back().offset, scan.refused.back().reason);
    if (refuse_lost_checkpoint(
            resume, facts, what,
            fmt::format("exactly-once cannot start: {}; the events after the slot's position {} that Kafka already "
                        "holds would be published again, which read_committed consumers would read twice. Find who "
                        "can write to {} (grant WRITE to pgoutbox's principal only, docs/security.md); then accept "
                        "the duplicates once with `pgoutbox run --accept-lost-checkpoint`, or drop the slot "
                        "(pgoutbox slot drop) so that a new one starts at the current position",
                        what, facts.slot_confirmed.to_string(), facts.checkpoint_topic)))
      return resume;
  }
  if (!scan.mine) {
    resume.note = "no checkpoint for this slot yet: nothing to skip";
    return resume;
  }
  const auto& c = *scan.mine;
  if (!facts.signing) {
    resume.note = fmt::format(
        "checkpoint at {} is not trusted, because checkpoints are not signed (no checkpoint.signing_key): nothing "
        "is skipped, and after a Postgres crash events past the slot's position {} may be published again",
        c.lsn.to_string(), facts.slot_confirmed.to_string());
    return resume;
  }
  if (const auto why = disagreement(c, facts); !why.empty()) {
    resume.warnings.push_back(fmt::format(
        "checkpoint at {} does not belong to this instance ({}): it is not used, and events after the slot's "
        "position {} may be published again",
        c.lsn.to_string(), why, facts.slot_confirmed.to_string()));
    return resume;
  }
  if (c.version < kafka::kCheckpointVersion) {
    // Its LSN may be a keepalive's position, past transactions that differ on a restored copy of
    // the database, and it names no transaction the stream could prove the history by.
    resume.warnings.push_back(fmt::format(
        "checkpoint at {} was written by an older pgoutbox (checkpoint version {}), without the transaction it "
        "covers: it is not used, and events after the slot's position {} may be published again; the next "
        "checkpoint written replaces it",
        c.lsn.to_string(), c.version, facts.slot_confirmed.to_string()));
    return resume;
  }
  if (c.names_a_message()) {
    // A message's content and position are the writer's to choose: a copy of the database
    // restored onto the same timeline can hold a forged one there (issue 37 item 3).
    resume.warnings.push_back(fmt::format(
        "checkpoint at {} names a non-transactional message, not a transaction (written by an older pgoutbox): it "
        "is not used, and events after the slot's position {} may be published again; the next checkpoint written "
        "replaces it",
        c.lsn.to_string(), facts.slot_confirmed.to_string()));
    return resume;
  }
  if (facts.refused != nullptr && c.transaction() && facts.refused->contains(*c.transaction())) {
    resume.warnings.push_back(fmt::format(
        "checkpoint at {} was found written over another WAL history by an earlier session: it is not used, and "
        "events after the slot's position {} are published again",
        c.lsn.to_string(), facts.slot_confirmed.to_string()));
    return resume;
  }
  if (c.timeline != facts.timeline) {
    resume.warnings.push_back(fmt::format(
        "checkpoint at {} was written on timeline {}, the server is on timeline {} (a promoted standby or a "
        "restored backup): it is not used, and events after the slot's position {} may be published again",
        c.lsn.to_string(), c.timeline, facts.timeline, facts.slot_confirmed.to_string()));
    return resume;
  }
  if (c.end() > facts.server_position) {
    resume.warnings.push_back(fmt::format(
        "checkpoint at {} is ahead of the server's WAL ({}): the database was restored to an earlier point; it is "
        "not used, and events after the slot's position {} may be published again",
        c.end().to_string(), facts.server_position.to_string(), facts.slot_confirmed.to_string()));
    return resume;
  }
  resume.covered = c.covers();
  if (c.end() <= facts.slot_confirmed) {
    resume.note = fmt::format("checkpoint at {} is not ahead of the slot ({}): nothing to skip", c.end().to_string(),
                              facts.slot_confirmed.to_string());
    return resume;
  }
  resume.skip_below = c.end();
  if (c.lsn > facts.slot_confirmed) {
    resume.note = fmt::format(
        "checkpoint at {} is ahead of the slot ({}): transactions up to it are already in Kafka and are skipped, "
        "confirmed once the stream shows its transaction (xid {}) there",
        c.end().to_string(), facts.slot_confirmed.to_string(), c.xid);
  } else {
    resume.note = fmt::format(
        "checkpoint at {} is ahead of the slot ({}): the non-transactional messages up to it are already handled "
        "and are skipped, until a transaction shows",
        c.end().to_string(), facts.slot_confirmed.to_string());
  }
  return resume;
}

}  // namespace pgoutbox::relay
