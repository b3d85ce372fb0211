#include "suggest.h"

#include <algorithm>
#include <limits>

namespace pgoutbox::config::detail {
namespace {

std::string squash(std::string_view word) {
  std::string out;
  for (char c : word) {
    if (c == '_' || c == '-') continue;
    out += (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c;
  }
  return out;
}

// Short words are one typo from many others ("slot", "port"); longer ones tolerate more.
std::size_t tolerance(std::size_t length) {
  if (length <= 4) return 1;
  if (length <= 9) return 2;
  return 3;
}

}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string squashed = squash(word);
  for (const auto& candidate : candidates) {
    if (squash(candidate) == squashed) return candidate;
  }
  // "warning" for "warn", "tombstones" for "tombstone": one candidate is the start of the word.
  std::optional<std::string> prefixed;
  std::size_t prefix_matches = 0;
  for (const auto& candidate : candidates) {
    const std::string other = squash(candidate);
    const auto& shorter = other.size() < squashed.size() ? other : squashed;
    const auto& longer = other.size() < squashed.size() ? squashed : other;
    if (shorter.size() >= 3 && longer.starts_with(shorter)) {
      prefixed = candidate;
      ++prefix_matches;
    }
  }
  if (prefix_matches == 1) return prefixed;
  std::optional<std::string> best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (const auto& candidate : candidates) {
    const std::size_t distance = edit_distance(squashed, squash(candidate));
    if (distance < best_distance && distance <= tolerance(std::min(word.size(), candidate.size()))) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace pgoutbox::config::detail
