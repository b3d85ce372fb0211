#pragma once

// What a failed delivery means for its record (docs/spec.md I8), as a pure decision: the relay
// carries the action out. Retry delays come from the project's one Backoff policy.

#include <chrono>
#include <cstdint>

#include "pgoutbox/config/config.h"
#include "pgoutbox/kafka/sink.h"
#include "pgoutbox/relay/delivery_cookie.h"

namespace pgoutbox::relay {

struct Action {
  enum class Kind {
    send_alone,   // refused in a batch: perhaps for another record; its own first attempt, at once
    retry_after,  // send `next` again after `delay`
    dead_letter,  // policy dead-letter: write it to the dead-letter topic
    skip,         // policy skip: drop it and confirm past it
    stop,         // policy stop, or the dead-letter topic refused it too: end unconfirmed
    rebuild,      // the producer is unusable: end the session, resume from the slot
  };
  Kind kind = Kind::stop;
  DeliveryCookie next;  // for send_alone / retry_after
  std::chrono::milliseconds delay{0};
};

struct PoisonRules {
  config::PoisonConfig poison;
  std::chrono::milliseconds max_delay{30'000};  // reconnect.max caps the retry delay
  std::uint64_t seed = 0;                       // Backoff's jitter; 0: random
};

Action decide(kafka::DeliveryFailure failure, DeliveryCookie cookie, const PoisonRules& rules);

// What the policy does with a record that cannot be delivered (or cannot become a record).
Action::Kind policy_action(config::PoisonPolicy policy);

}  // namespace pgoutbox::relay
