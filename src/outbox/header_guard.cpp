#include "pgoutbox/outbox/header_guard.h"

#include <spdlog/spdlog.h>

#include <map>
#include <mutex>

namespace pgoutbox::outbox {
namespace {

// Shown in the one warning per table: enough to recognise the key, never a whole row value.
constexpr std::size_t kShownNameBytes = 64;

bool equals_ascii_nocase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

struct DroppedCounts {
  std::mutex mutex;
  std::map<std::string, std::uint64_t, std::less<>> by_table;
};

DroppedCounts& dropped() {
  static DroppedCounts counts;
  return counts;
}

}  // namespace

bool is_reserved_header(std::string_view name) {
  constexpr std::string_view kPrefix = "pgoutbox.";
  // A name with a NUL is whatever its reader makes of it: for a C-string reader, its prefix.
  if (has_nul(name)) return true;
  return equals_ascii_nocase(name, "id") || equals_ascii_nocase(name, "type") ||
         (name.size() >= kPrefix.size() && equals_ascii_nocase(name.substr(0, kPrefix.size()), kPrefix));
}

void count_dropped_header(const std::string& table, std::string_view name) {
  auto& counts = dropped();
  bool first = false;
  {
    std::lock_guard lock(counts.mutex);
    auto [it, inserted] = counts.by_table.try_emplace(table, 0);
    first = inserted;
    ++it->second;
  }
  if (first) {
    spdlog::warn(
        "outbox table {}: the headers column sets the reserved header \"{}\"{}; it is dropped (pgoutbox alone "
        "sets id, type and pgoutbox.*, and a name with a NUL byte reads as a shorter one to C clients). Further drops "
        "on this table are only counted "
        "(pgoutbox_headers_dropped_total)",
        table, name.substr(0, kShownNameBytes), name.size() > kShownNameBytes ? "..." : "");
  }
}

std::vector<std::pair<std::string, std::uint64_t>> dropped_header_counts() {
  auto& counts = dropped();
  std::lock_guard lock(counts.mutex);
  return {counts.by_table.begin(), counts.by_table.end()};
}

}  // namespace pgoutbox::outbox
