#include "cutover.h"

#include <fmt/format.h>

namespace shop {

CutoverReport reconcile_cutover(const std::vector<MessageFact>& rows, const std::map<std::string, Copies>& topic) {
  CutoverReport report;
  std::size_t known = 0;
  for (const auto& row : rows) {
    ++report.rows;
    if (row.status == "SENT") ++report.sent;
    const auto found = topic.find(row.id);
    if (found == topic.end() || found->second.total() == 0) {
      report.lost.push_back(row.id);
      continue;
    }
    ++known;
    const Copies& c = found->second;
    report.by_poller += c.poller > 0 ? 1 : 0;
    report.by_backfill += c.backfill > 0 ? 1 : 0;
    report.by_stream += c.stream > 0 ? 1 : 0;
    if (c.total() == 1) continue;
    const bool both = c.poller > 0 && c.stream + c.backfill > 0;
    if (!both || c.poller > 1 || c.stream + c.backfill > 1) {
      report.one_relay_twice.push_back(row.id);
    } else if (row.status == "SENT") {
      report.sent_after_snapshot.push_back(row.id);
    } else {
      report.unmarked_batch.push_back(row.id);
    }
  }
  report.unknown_ids = static_cast<std::int64_t>(topic.size() - known);
  return report;
}

std::string cutover_summary_line(const CutoverReport& report) {
  return fmt::format(
      "cutover: {} rows, {} lost, {} duplicates ({} unmarked batch, {} sent after the snapshot, {} one relay twice); "
      "published by the poller {}, pgoutbox's backfill {}, its stream {}",
      report.rows, report.lost.size(), report.duplicates(), report.unmarked_batch.size(),
      report.sent_after_snapshot.size(), report.one_relay_twice.size(), report.by_poller, report.by_backfill,
      report.by_stream);
}

}  // namespace shop
