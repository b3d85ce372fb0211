#include "pgoutbox/relay/checkpoint_trust.h"

#include <fmt/format.h>

namespace pgoutbox::relay {

Resume trust_checkpoint(const kafka::CheckpointScan& scan, const ResumeFacts& facts) {
  Resume resume;
  if (!scan.warning.empty()) resume.warnings.push_back(scan.warning);
  for (const auto& other : scan.other_systems) {
    resume.warnings.push_back(fmt::format(
        "checkpoint topic holds a checkpoint of slot {} in database {} from another system ({}, this one is {}): "
        "a recreated cluster or a copy of the database; it is not used",
        other.slot.slot, other.slot.database, other.slot.system_id, facts.identity.system_id));
  }
  if (facts.delivery == config::Delivery::exactly_once && !scan.same_transactional_id.empty()) {
    const auto& other = scan.same_transactional_id.front();
    resume.refused = Outcome::fatal(
        Fatal::kafka_config,
        fmt::format("kafka.transactional_id {} is also used by slot {} of database {} (system {}): two slots "
                    "sharing one transactional id fence each other. Fix: give each configuration its own "
                    "kafka.transactional_id (or leave it empty to derive it from the slot)",
                    facts.transactional_id, other.slot.slot, other.slot.database, other.slot.system_id));
    return resume;
  }
  if (!scan.mine) {
    resume.note = "no checkpoint for this slot yet: nothing to skip";
    return resume;
  }
  const auto& c = *scan.mine;
  if (c.timeline != facts.timeline) {
    resume.warnings.push_back(fmt::format(
        "checkpoint at {} was written on timeline {}, the server is on timeline {} (a promoted standby or a "
        "restored backup): it is not used, and events after the slot's position {} may be published again",
        c.lsn.to_string(), c.timeline, facts.timeline, facts.slot_confirmed.to_string()));
    return resume;
  }
  if (c.lsn > facts.server_position) {
    resume.warnings.push_back(fmt::format(
        "checkpoint at {} is ahead of the server's WAL ({}): the database was restored to an earlier point; it is "
        "not used, and events after the slot's position {} may be published again",
        c.lsn.to_string(), facts.server_position.to_string(), facts.slot_confirmed.to_string()));
    return resume;
  }
  if (c.lsn <= facts.slot_confirmed) {
    resume.note = fmt::format("checkpoint at {} is not ahead of the slot ({}): nothing to skip", c.lsn.to_string(),
                              facts.slot_confirmed.to_string());
    return resume;
  }
  resume.skip_below = c.lsn;
  resume.note = fmt::format(
      "checkpoint at {} is ahead of the slot ({}): transactions up to it are already in Kafka and are skipped",
      c.lsn.to_string(), facts.slot_confirmed.to_string());
  return resume;
}

}  // namespace pgoutbox::relay
