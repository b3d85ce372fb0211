#include "duration.h"

#include <charconv>

namespace shop {

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  long long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data() || value < 0) return std::nullopt;
  const std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
  if (unit == "ms") return std::chrono::milliseconds(value);
  if (unit == "s") return std::chrono::seconds(value);
  if (unit == "m") return std::chrono::minutes(value);
  if (unit == "h") return std::chrono::hours(value);
  return std::nullopt;
}

std::optional<std::vector<std::chrono::milliseconds>> parse_duration_list(std::string_view text) {
  std::vector<std::chrono::milliseconds> out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const auto item = parse_duration(text.substr(0, comma));
    if (!item) return std::nullopt;
    out.push_back(*item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace shop
