#pragma once

// What both delivery paths do with a record Kafka will not take, or a row that cannot become a
// record (docs/spec.md I8): poison.policy's skip, dead-letter or stop, logged with the record's
// fields and counted. And the log line of one record, which every path writes the same way.

#include <cstdint>
#include <optional>
#include <string>

#include <spdlog/common.h>

#include "pgoutbox/config/config.h"
#include "pgoutbox/kafka/sink.h"
#include "pgoutbox/outbox/record.h"
#include "pgoutbox/relay/confirm_tracker.h"
#include "pgoutbox/relay/counters.h"
#include "pgoutbox/relay/delivery_path.h"
#include "pgoutbox/relay/observer.h"

namespace pgoutbox::relay {

void log_record(spdlog::level::level_enum level, const outbox::Record& record, Lsn commit_lsn,
                const std::string& message);

class PoisonPolicy {
 public:
  PoisonPolicy(const config::PoisonConfig& poison, const ConfirmTracker& tracker, Counters& counters,
               Observer& observer, DeliveryEvents& events);

  // Applies the policy to `record` of `unit` after `attempts` deliveries. Skip: it is completed.
  // Stop: the session ends. Dead-letter: returns the dead-letter record, for the caller to send
  // with DeliveryCookie::dead_letter_write(unit).
  std::optional<outbox::Record> apply(const outbox::Record& record, ConfirmTracker::TxnId unit,
                                      const kafka::DeliveryError& error, std::uint32_t attempts);
  // The dead-letter topic refused a dead-letter write too: nothing safe is left but to stop
  // without confirming it (either delivery mode).
  void dead_letter_refused(const outbox::Record& dead_letter, ConfirmTracker::TxnId unit,
                           const kafka::DeliveryError& error);
  void log(spdlog::level::level_enum level, const outbox::Record& record, ConfirmTracker::TxnId unit,
           const std::string& message) const {
    log_record(level, record, tracker_.commit_lsn(unit), message);
  }

 private:
  const config::PoisonConfig& poison_;
  const ConfirmTracker& tracker_;
  Counters& counters_;
  Observer& observer_;
  DeliveryEvents& events_;
};

}  // namespace pgoutbox::relay
