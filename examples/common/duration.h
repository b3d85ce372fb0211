#pragma once

#include <chrono>
#include <optional>
#include <string_view>
#include <vector>

namespace shop {

// "250ms", "5s", "2m", "1h" -> milliseconds; nullopt for anything else.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

// "5s,30s,2m,10m" -> the list; nullopt when any element is not a duration.
std::optional<std::vector<std::chrono::milliseconds>> parse_duration_list(std::string_view text);

}  // namespace shop
