#include "poison_policy.h"

#include <algorithm>

#include <fmt/format.h>

#include "dead_letter.h"
#include "pgoutbox/logging/logging.h"
#include "pgoutbox/relay/poison.h"

namespace pgoutbox::relay {

void log_record(spdlog::level::level_enum level, const outbox::Record& record, Lsn commit_lsn,
                const std::string& message) {
  std::string_view trace_id;
  for (const auto& h : record.headers) {
    if (h.name == "traceparent") trace_id = logging::trace_id_from_traceparent(h.value);
  }
  logging::event(level,
                 logging::EventFields{record.event_id, record.key ? std::string_view(*record.key) : std::string_view(),
                                      record.topic, trace_id, commit_lsn},
                 message);
}

PoisonPolicy::PoisonPolicy(const config::PoisonConfig& poison, const ConfirmTracker& tracker, Counters& counters,
                           Observer& observer, DeliveryEvents& events)
    : poison_(poison), tracker_(tracker), counters_(counters), observer_(observer), events_(events) {}

std::optional<outbox::Record> PoisonPolicy::apply(const outbox::Record& record, ConfirmTracker::TxnId unit,
                                                  const kafka::DeliveryError& error, std::uint32_t attempts) {
  const auto& code = error.code;
  const auto& reason = error.text;
  switch (policy_action(poison_.policy)) {
    case Action::Kind::skip:
      log(spdlog::level::warn, record, unit,
          fmt::format("poison record ({}: {}) after {} attempt(s); policy skip: dropped", code, reason, attempts));
      ++counters_.skipped;
      observer_.event_poison(record.table, record.topic, PoisonAction::skipped);
      events_.completed(unit, record.weight());
      return std::nullopt;
    case Action::Kind::dead_letter: {
      log(spdlog::level::warn, record, unit,
          fmt::format("poison record ({}: {}) after {} attempt(s); sending it to {}", code, reason, attempts,
                      poison_.dead_letter_topic));
      auto dlq =
          dead_letter_record(record, poison_.dead_letter_topic,
                             DeadLetterCause{reason, code, attempts, tracker_.commit_lsn(unit), error.size_refusal});
      // Its ack releases the dead-letter record's weight: count the original's as that, so the
      // in-flight bytes come back to what they were (a size refusal's copy has no value).
      events_.lightened(record.weight() - std::min(record.weight(), dlq.weight()));
      return dlq;
    }
    default:
      break;
  }
  log(spdlog::level::err, record, unit,
      fmt::format("poison record ({}: {}) after {} attempt(s); policy stop: exiting without confirming it", code,
                  reason, attempts));
  observer_.event_poison(record.table, record.topic, PoisonAction::stopped);
  events_.ended(
      Outcome::fatal(Fatal::poison, fmt::format("poison record, event id {}, topic {}: {} ({}). Fix the cause, or set "
                                                "poison.policy: dead-letter, and restart: it is read again",
                                                record.event_id.empty() ? "(none)" : record.event_id,
                                                record.topic.empty() ? "(none)" : record.topic, reason, code)));
  return std::nullopt;
}

void PoisonPolicy::dead_letter_refused(const outbox::Record& dead_letter, ConfirmTracker::TxnId unit,
                                       const kafka::DeliveryError& error) {
  log(spdlog::level::err, dead_letter, unit,
      fmt::format("the dead-letter topic {} refused a poison record: {} ({})", dead_letter.topic, error.text,
                  error.code));
  const auto source = dead_letter_source(dead_letter);
  observer_.event_poison(source.table, source.topic, PoisonAction::stopped);
  events_.ended(
      Outcome::fatal(Fatal::poison, fmt::format("cannot dead-letter event {} to {}: {} ({})", dead_letter.event_id,
                                                dead_letter.topic, error.text, error.code)));
}

}  // namespace pgoutbox::relay
