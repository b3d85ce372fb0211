#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kafka_client.h"
#include "load_writer.h"

namespace pgoutbox::test {

// What Kafka holds, held against what was committed (docs/spec.md I1, I4, I5). Records are matched
// by their header "id".
struct AuditReport {
  std::size_t written = 0;                    // committed events
  std::size_t records = 0;                    // records read from the topics
  std::size_t delivered = 0;                  // committed events with at least one record
  std::size_t duplicates = 0;                 // records beyond the first of their id
  std::size_t lost = 0;                       // committed events with no record
  std::size_t unexpected = 0;                 // records whose id was never committed (or has no id)
  std::size_t misrouted = 0;                  // first copy on another topic than the event's
  std::size_t order_violations = 0;           // a key's first deliveries out of commit order
  std::size_t duplicate_mismatches = 0;       // a repeat whose key or value differs from its first copy
  std::map<std::string, std::size_t> copies;  // id → number of records (delivered ids only)
  std::vector<std::string> problems;          // the first few findings, readable

  bool clean() const {
    return lost == 0 && unexpected == 0 && misrouted == 0 && order_violations == 0 && duplicate_mismatches == 0;
  }
  std::string summary() const;
};

AuditReport audit_events(const std::vector<CommittedEvent>& committed, const std::vector<ConsumedRecord>& records);

// Reads every record of `topics`, again and again, until each committed event is there or the
// timeout passes; returns the last read.
std::vector<ConsumedRecord> read_until_complete(const std::string& bootstrap, const std::vector<std::string>& topics,
                                                const std::vector<CommittedEvent>& committed,
                                                std::chrono::milliseconds timeout);

// The distinct topics of the events.
std::vector<std::string> topics_of(const std::vector<CommittedEvent>& committed);

}  // namespace pgoutbox::test
