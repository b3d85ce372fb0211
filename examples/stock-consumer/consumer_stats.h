#pragma once

#include <cstdint>
#include <string>

namespace shop {

// What the consumer did, by outcome. Written as NAME=value lines to a file (a shell can source
// it; scripts/demo.sh shows it in its status line) and logged at exit.
struct ConsumerStats {
  std::int64_t handled = 0;        // records whose offset may be committed
  std::int64_t applied = 0;        // stock reserved
  std::int64_t duplicates = 0;     // skipped: consumer_log already had the event id
  std::int64_t rejected = 0;       // business error: compensating event sent, rejection recorded
  std::int64_t dead_lettered = 0;  // malformed, or transient retries used up
  std::int64_t retries = 0;        // transient failures retried after a backoff
  std::int64_t lag = 0;            // records in the assigned partitions after the last handled one

  std::string to_text() const;
  // Replaces `path` atomically (write then rename), so readers never see half a file.
  void write_file(const std::string& path) const;
};

}  // namespace shop
