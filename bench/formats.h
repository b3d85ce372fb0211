#pragma once

// Record formats (docs/migrating.md "Record formats"): what writing Debezium's JsonConverter
// bytes or CloudEvents costs pgoutbox against format string on the same backlog drain. Every case drains the
// same backlog as the throughput table's 10 × 200 B scenario (jsonb payloads, varchar keys),
// from its own slot made before the backlog, into its own topic, at-least-once; the cases run
// twice, the second time in the reverse order, so that going first or last (a broker still
// writing out the last drain) is not read as a format's cost.

#include <cstdint>
#include <string>
#include <vector>

#include "contenders.h"

namespace pgoutbox::bench {

struct FormatsSpec {
  std::int64_t events = 1'000'000;      // at 150,000-250,000 events/s, a drain of 4-7 s
  std::int64_t warmup_events = 10'000;  // an untimed drain first
  int rounds = 3;                       // each case this many times, every other round reversed
};

struct FormatCase {
  std::string name;              // as the table shows it
  std::string tag;               // slot and topic names
  std::vector<std::string> env;  // pgoutbox's configuration overrides
  // A control, not a format: format string with three more headers (provenance_headers), to show
  // what headers alone cost against cloudevents-binary's six; it has no target.
  bool control = false;
};

struct FormatsRow {
  FormatCase format;
  std::int64_t events = 0;
  std::vector<DrainResult> runs;     // one per round
  double events_per_second() const;  // the rounds' median
  double cpu_us_per_event() const;   // the rounds' median
  std::int64_t value_bytes = 0;      // of one record's value, as a consumer reads it (the first event's)
};

std::vector<FormatCase> format_cases();

// Throws when an event is lost.
std::vector<FormatsRow> measure_formats(const Bench& bench, const FormatsSpec& spec);

std::string to_formats_markdown(const std::vector<FormatsRow>& rows, const FormatsSpec& spec,
                                const std::string& header);

}  // namespace pgoutbox::bench
