#include "dead_letter.h"

namespace pgoutbox::relay {

outbox::Record dead_letter_record(const outbox::Record& original, const std::string& dead_letter_topic,
                                  const DeadLetterCause& cause) {
  outbox::Record dlq = original;
  dlq.topic = dead_letter_topic;
  dlq.headers.push_back({"pgoutbox.dlq.error", cause.error});
  dlq.headers.push_back({"pgoutbox.dlq.error.code", cause.error_code});
  dlq.headers.push_back({"pgoutbox.dlq.topic", original.topic});
  dlq.headers.push_back({"pgoutbox.dlq.attempts", std::to_string(cause.attempts)});
  dlq.headers.push_back({"pgoutbox.dlq.lsn", cause.lsn.to_string()});
  return dlq;
}

}  // namespace pgoutbox::relay
