#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shop {

// One local_message row, as reconcile --cutover reads it.
struct MessageFact {
  std::string id;
  std::string status;  // NEW or SENT
};

// The topic's records for one event id, by the relay that published them: the poller stamps its
// records with header relay=outbox-poller; pgoutbox's streamed records carry pgoutbox.lsn
// (provenance_headers: true); a record with neither is counted as pgoutbox's backfill, the only
// other relay of the topic in the cutover (its records carry no provenance header).
struct Copies {
  int poller = 0;
  int stream = 0;
  int backfill = 0;
  int total() const { return poller + stream + backfill; }
};

// A cutover from the poller to pgoutbox (docs/migrating.md "Switching from a polling relay"), checked row by
// row: every local_message row's id must be in the topic; a row in it more than once is a
// duplicate, sorted by why.
struct CutoverReport {
  std::int64_t rows = 0;
  std::int64_t sent = 0;       // marked SENT by the poller
  std::int64_t by_poller = 0;  // rows the poller published (at least once)
  std::int64_t by_backfill = 0;
  std::int64_t by_stream = 0;
  std::vector<std::string> lost;  // in no record of the topic
  // Published by the poller and by pgoutbox, and still NEW: the poller published it but its SENT
  // mark never committed (the batch in flight when it was killed).
  std::vector<std::string> unmarked_batch;
  // Published by both and SENT: the poller marked it after the slot's snapshot, so pgoutbox
  // published it too (from the snapshot if it was NEW there, from the stream if it came later).
  std::vector<std::string> sent_after_snapshot;
  // One relay published it more than once (the poller's batch rolled back after its acks, e.g. a
  // lost connection). pgoutbox never does this.
  std::vector<std::string> one_relay_twice;
  std::int64_t unknown_ids = 0;  // ids in the topic that are no local_message row
  std::int64_t duplicates() const {
    return static_cast<std::int64_t>(unmarked_batch.size() + sent_after_snapshot.size() + one_relay_twice.size());
  }
  bool clean() const { return lost.empty(); }
};

CutoverReport reconcile_cutover(const std::vector<MessageFact>& rows, const std::map<std::string, Copies>& topic);

// "cutover: N rows, 0 lost, D duplicates (U unmarked batch, S sent after the snapshot, O one relay
// twice); published by the poller P, pgoutbox's backfill B, its stream T".
std::string cutover_summary_line(const CutoverReport& report);

}  // namespace shop
