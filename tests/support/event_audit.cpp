#include "event_audit.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace pgoutbox::test {
namespace {

constexpr std::size_t kProblemsKept = 20;

void note(AuditReport& report, const std::string& text) {
  if (report.problems.size() < kProblemsKept) report.problems.push_back(text);
}

}  // namespace

std::string AuditReport::summary() const {
  std::ostringstream out;
  out << "written " << written << ", records " << records << ", delivered " << delivered << ", lost " << lost
      << ", duplicates " << duplicates << ", unexpected " << unexpected << ", misrouted " << misrouted
      << ", order violations " << order_violations << ", duplicate mismatches " << duplicate_mismatches;
  for (const auto& p : problems) out << "\n  " << p;
  return out.str();
}

std::vector<std::string> topics_of(const std::vector<CommittedEvent>& committed) {
  std::set<std::string> topics;
  for (const auto& ev : committed) topics.insert(ev.topic);
  return {topics.begin(), topics.end()};
}

AuditReport audit_events(const std::vector<CommittedEvent>& committed, const std::vector<ConsumedRecord>& records) {
  AuditReport report;
  report.written = committed.size();
  report.records = records.size();
  std::unordered_map<std::string, const CommittedEvent*> by_id;
  for (const auto& ev : committed) by_id.emplace(ev.id, &ev);

  // Records in log order: per topic and partition, by offset (read order across partitions is
  // arbitrary, within one it is the log's).
  std::vector<const ConsumedRecord*> ordered;
  for (const auto& r : records) ordered.push_back(&r);
  std::sort(ordered.begin(), ordered.end(), [](const ConsumedRecord* a, const ConsumedRecord* b) {
    return std::tie(a->topic, a->partition, a->offset) < std::tie(b->topic, b->partition, b->offset);
  });

  std::unordered_map<std::string, const ConsumedRecord*> first_copy;
  std::map<std::pair<std::string, std::string>, std::int64_t>
      last_seq;  // (topic, key) → seq of the last first delivery
  std::map<std::pair<std::string, std::string>, std::int32_t> partition_of;
  for (const ConsumedRecord* r : ordered) {
    const auto id = r->header("id");
    const auto found = id ? by_id.find(*id) : by_id.end();
    if (found == by_id.end()) {
      report.unexpected += 1;
      note(report, "record without a committed id: " + r->topic + "/" + std::to_string(r->partition) + "@" +
                       std::to_string(r->offset) + " id=" + id.value_or("<none>"));
      continue;
    }
    const CommittedEvent& ev = *found->second;
    auto& copies = report.copies[ev.id];
    copies += 1;
    if (copies > 1) {
      report.duplicates += 1;
      const ConsumedRecord& first = *first_copy.at(ev.id);
      if (first.key != r->key || first.value != r->value || first.topic != r->topic) {
        report.duplicate_mismatches += 1;
        note(report, "repeat of " + ev.id + " at offset " + std::to_string(r->offset) +
                         " differs from its first copy at " + std::to_string(first.offset));
      }
      continue;
    }
    first_copy.emplace(ev.id, r);
    if (r->topic != ev.topic) {
      report.misrouted += 1;
      note(report, ev.id + " on " + r->topic + ", expected " + ev.topic);
    }
    if (r->key != ev.key) {
      report.misrouted += 1;
      note(report, ev.id + " with key " + r->key.value_or("<null>") + ", expected " + ev.key);
    }
    const auto key = std::make_pair(r->topic, ev.key);
    if (const auto [it, inserted] = partition_of.emplace(key, r->partition); !inserted && it->second != r->partition) {
      report.order_violations += 1;
      note(report,
           "key " + ev.key + " in partitions " + std::to_string(it->second) + " and " + std::to_string(r->partition));
    }
    auto& last = last_seq[key];
    if (ev.seq <= last) {
      report.order_violations += 1;
      note(report, "key " + ev.key + ": first delivery of seq " + std::to_string(ev.seq) + " (" + ev.id +
                       ") after seq " + std::to_string(last));
    }
    last = std::max(last, ev.seq);
  }
  report.delivered = first_copy.size();
  for (const auto& ev : committed) {
    if (first_copy.count(ev.id) == 0) {
      report.lost += 1;
      note(report, "lost: " + ev.id + " (key " + ev.key + " seq " + std::to_string(ev.seq) + ")");
    }
  }
  return report;
}

std::vector<ConsumedRecord> read_until_complete(const std::string& bootstrap, const std::vector<std::string>& topics,
                                                const std::vector<CommittedEvent>& committed,
                                                std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unordered_set<std::string> wanted;
  for (const auto& ev : committed) wanted.insert(ev.id);
  std::vector<ConsumedRecord> all;
  for (;;) {
    // Cheap first: the high watermarks must at least cover the committed count.
    std::int64_t present = 0;
    std::vector<std::string> existing;  // read_topic waits for a topic to exist: skip empty ones
    for (const auto& t : topics) {
      const auto count = topic_record_count(bootstrap, t);
      present += count;
      if (count > 0) existing.push_back(t);
    }
    const bool may_be_complete = present >= static_cast<std::int64_t>(wanted.size());
    if (may_be_complete || std::chrono::steady_clock::now() >= deadline) {
      all.clear();
      for (const auto& t : existing) {
        auto part = read_topic(bootstrap, t, 0, std::chrono::seconds(60));
        all.insert(all.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
      }
      std::unordered_set<std::string> seen;
      for (const auto& r : all) {
        if (const auto id = r.header("id")) seen.insert(*id);
      }
      const bool complete =
          std::all_of(wanted.begin(), wanted.end(), [&](const std::string& id) { return seen.count(id) > 0; });
      if (complete || std::chrono::steady_clock::now() >= deadline) return all;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace pgoutbox::test
