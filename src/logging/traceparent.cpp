// W3C Trace Context, "traceparent Header": version "-" trace-id "-" parent-id "-" trace-flags,
// lower-case hex of 2, 32, 16 and 2 digits. Version ff is invalid, and so is an all-zero
// trace-id or parent-id. Later versions may append "-..." fields; their first four fields keep
// this shape, so only version 00 must be exactly 55 characters long.
#include <algorithm>

#include "pgoutbox/logging/logging.h"

namespace pgoutbox::logging {
namespace {

bool lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}
bool all_zero(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == '0'; });
}

}  // namespace

std::string_view trace_id_from_traceparent(std::string_view value) {
  constexpr std::size_t kLength = 55;  // 2 + 1 + 32 + 1 + 16 + 1 + 2
  // Header values may carry optional whitespace around them (RFC 9110 §5.5).
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (value.size() < kLength) return {};
  const auto version = value.substr(0, 2);
  const auto trace_id = value.substr(3, 32);
  const auto parent_id = value.substr(36, 16);
  const auto flags = value.substr(53, 2);
  if (value[2] != '-' || value[35] != '-' || value[52] != '-') return {};
  if (!lower_hex(version) || version == "ff" || !lower_hex(trace_id) || !lower_hex(parent_id) || !lower_hex(flags)) {
    return {};
  }
  if (version == "00" ? value.size() != kLength : value.size() > kLength && value[kLength] != '-') return {};
  if (all_zero(trace_id) || all_zero(parent_id)) return {};
  return trace_id;
}

}  // namespace pgoutbox::logging
