#pragma once

// "did you mean ...": the candidate closest to a misspelt word, when one is close enough to be a
// likely typo rather than a different word.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pgoutbox::config::detail {

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of
// neighbours each cost 1, so "pasword" and "passwrod" are both one step from "password".
std::size_t edit_distance(std::string_view a, std::string_view b);

// Also matches spellings that differ only in case, '-' or '_' (maxInFlightBytes,
// max-in-flight-bytes), and a word that starts, or is the start of, one candidate alone (warning
// for warn).
std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace pgoutbox::config::detail
