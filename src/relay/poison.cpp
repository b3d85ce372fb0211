#include "pgoutbox/relay/poison.h"

#include <algorithm>

#include "pgoutbox/backoff.h"

namespace pgoutbox::relay {

Action::Kind policy_action(config::PoisonPolicy policy) {
  switch (policy) {
    case config::PoisonPolicy::stop:
      return Action::Kind::stop;
    case config::PoisonPolicy::skip:
      return Action::Kind::skip;
    case config::PoisonPolicy::dead_letter:
      return Action::Kind::dead_letter;
  }
  return Action::Kind::stop;
}

Action decide(kafka::DeliveryFailure failure, DeliveryCookie cookie, const PoisonRules& rules) {
  using Kind = Action::Kind;
  // Fenced only reaches here in at-least-once mode, where no transactional id is set: rebuild.
  if (failure == kafka::DeliveryFailure::fatal || failure == kafka::DeliveryFailure::fenced)
    return {Kind::rebuild, cookie, {}};
  // librdkafka retries transient failures itself; one that still comes back is sent again,
  // without limit (I1), dead-letter writes included.
  if (failure == kafka::DeliveryFailure::retriable) return {Kind::retry_after, cookie, rules.poison.retry_backoff};
  if (cookie.dead_letter) return {Kind::stop, cookie, {}};  // the dead-letter topic refuses it too
  if (!cookie.isolated) return {Kind::send_alone, DeliveryCookie::alone(cookie.txn, 0), {}};
  if (cookie.attempt < rules.poison.max_retries) {
    Backoff backoff(rules.poison.retry_backoff, std::max(rules.max_delay, rules.poison.retry_backoff), 2.0, rules.seed);
    std::chrono::milliseconds delay{0};
    for (std::uint32_t i = 0; i <= cookie.attempt; ++i) delay = backoff.next();
    return {Kind::retry_after, DeliveryCookie::alone(cookie.txn, cookie.attempt + 1), delay};
  }
  return {policy_action(rules.poison.policy), cookie, {}};
}

}  // namespace pgoutbox::relay
