#pragma once

// The record written to the dead-letter topic for a poison record (docs/spec.md I8): the original
// key, value and headers, plus headers that say what went wrong, where it was going, after how
// many attempts and from which transaction — everything an operator needs to replay it.

#include <cstdint>
#include <string>
#include <string_view>

#include "pgoutbox/lsn.h"
#include "pgoutbox/outbox/record.h"

namespace pgoutbox::relay {

struct DeadLetterCause {
  std::string error;           // pgoutbox.dlq.error: the message
  std::string error_code;      // pgoutbox.dlq.error.code: librdkafka's error name, or a validation code
  std::uint32_t attempts = 0;  // pgoutbox.dlq.attempts: deliveries tried (0: refused before sending)
  Lsn lsn;                     // pgoutbox.dlq.lsn: commit LSN of the record's transaction
  // Kafka refused the record for its size: a copy would be refused too, so the dead-letter
  // record goes without the value, and says its size (pgoutbox.dlq.value.size) and SHA-256
  // (pgoutbox.dlq.value.sha256, hex) instead.
  bool without_value = false;
};

outbox::Record dead_letter_record(const outbox::Record& original, const std::string& dead_letter_topic,
                                  const DeadLetterCause& cause);

// Where a dead-letter record's original came from, read back from its headers: the table
// (pgoutbox.dlq.table, present when the record still held it: always for a row refused before it
// was sent, whose topic may be empty or invalid) and the topic it was going to (pgoutbox.dlq.topic).
struct DeadLetterSource {
  std::string_view table;
  std::string_view topic;
};
DeadLetterSource dead_letter_source(const outbox::Record& dead_letter);

}  // namespace pgoutbox::relay
