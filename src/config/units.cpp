#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "suggest.h"
#include "values.h"

namespace pgoutbox::config::detail {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; });
  return out;
}

// Digits starting at i; false on overflow or when there are none.
bool read_digits(std::string_view text, std::size_t& i, std::uint64_t& value) {
  const std::size_t start = i;
  value = 0;
  while (i < text.size() && is_digit(text[i])) {
    const std::uint64_t digit = std::uint64_t(text[i] - '0');
    if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) return false;
    value = value * 10 + digit;
    ++i;
  }
  return i > start;
}

constexpr std::int64_t kMaxDurationMs = 365LL * 24 * 3600 * 1000;

}  // namespace

std::string quote(std::string_view text) {
  constexpr std::size_t kMax = 80;
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += char(c);
    }
  }
  if (text.size() > kMax) out += "...";
  return out + "'";
}

bool parse_bool(std::string_view text) {
  // YAML 1.1 spellings too, since yaml-cpp and most people still write yes/no.
  const std::string t = lower(text);
  if (t == "true" || t == "yes" || t == "on") return true;
  if (t == "false" || t == "no" || t == "off") return false;
  throw Invalid(fmt::format("must be true or false (got {})", quote(text)));
}

std::chrono::milliseconds parse_duration(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return Invalid(
        fmt::format("{}; write a duration with a unit such as 500ms, 10s, 5m or 1h (got {})", why, quote(text)));
  };
  if (text.empty()) throw bad("is empty");
  std::int64_t total = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    std::uint64_t amount = 0;
    if (!read_digits(text, i, amount)) {
      throw bad(is_digit(text[i]) ? "is too large" : "must be a whole number followed by a unit");
    }
    const std::size_t unit_start = i;
    while (i < text.size() && !is_digit(text[i])) ++i;
    const std::string_view unit = text.substr(unit_start, i - unit_start);
    std::int64_t scale = 0;
    if (unit == "ms")
      scale = 1;
    else if (unit == "s")
      scale = 1000;
    else if (unit == "m")
      scale = 60'000;
    else if (unit == "h")
      scale = 3'600'000;
    else if (unit.empty())
      throw bad("has no unit");
    else if (unit.front() == '.')
      throw bad("must use whole numbers (1500ms, not 1.5s)");
    else
      throw bad(fmt::format("has unknown unit '{}'", unit));
    if (amount > std::uint64_t(kMaxDurationMs / scale)) throw bad("is longer than a year");
    total += std::int64_t(amount) * scale;
    if (total > kMaxDurationMs) throw bad("is longer than a year");
  }
  if (total == 0) throw Invalid(fmt::format("must be longer than 0 (got {})", quote(text)));
  return std::chrono::milliseconds(total);
}

std::string format_duration(std::chrono::milliseconds value) {
  std::int64_t ms = value.count();
  if (ms == 0) return "0ms";
  std::string out;
  for (const auto& [scale, unit] : {std::pair{3'600'000LL, "h"}, {60'000LL, "m"}, {1000LL, "s"}, {1LL, "ms"}}) {
    if (ms >= scale) {
      out += fmt::format("{}{}", ms / scale, unit);
      ms %= scale;
    }
  }
  return out;
}

std::uint64_t parse_size(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return Invalid(
        fmt::format("{}; write bytes, optionally with KiB, MiB or GiB, e.g. 64MiB (got {})", why, quote(text)));
  };
  std::size_t i = 0;
  std::uint64_t amount = 0;
  if (!read_digits(text, i, amount))
    throw bad(i < text.size() && is_digit(text[i]) ? "is too large" : "must start with a whole number");
  while (i < text.size() && text[i] == ' ') ++i;
  const std::string unit = lower(text.substr(i));
  int shift = 0;
  if (unit.empty() || unit == "b")
    shift = 0;
  else if (unit == "kib")
    shift = 10;
  else if (unit == "mib")
    shift = 20;
  else if (unit == "gib")
    shift = 30;
  else if (unit == "tib")
    shift = 40;
  else if (unit == "k" || unit == "kb" || unit == "m" || unit == "mb" || unit == "g" || unit == "gb" || unit == "t" ||
           unit == "tb")
    throw bad("is ambiguous: use the binary units KiB, MiB, GiB (1024-based)");
  else
    throw bad(fmt::format("has unknown unit '{}'", text.substr(i)));
  if (amount > (std::numeric_limits<std::uint64_t>::max() >> shift)) throw bad("is too large");
  return amount << shift;
}

std::string format_size(std::uint64_t bytes) {
  for (const auto& [shift, unit] : {std::pair{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}}) {
    const std::uint64_t scale = 1ULL << shift;
    if (bytes >= scale && bytes % scale == 0) return fmt::format("{}{}", bytes / scale, unit);
  }
  return fmt::format("{}", bytes);
}

std::uint64_t parse_count(std::string_view text) {
  std::size_t i = 0;
  std::uint64_t value = 0;
  if (!read_digits(text, i, value)) {
    const bool overflow = i < text.size() && is_digit(text[i]);
    throw Invalid(fmt::format("{} (got {})", overflow ? "is too large" : "must be a whole number", quote(text)));
  }
  if (i != text.size()) throw Invalid(fmt::format("must be a whole number (got {})", quote(text)));
  return value;
}

double parse_number(std::string_view text) {
  double value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  if (!text.empty() && text.front() == '+') ++begin;  // YAML allows it; from_chars does not
  const auto [ptr, ec] = std::from_chars(begin, end, value, std::chars_format::general);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value)) {
    throw Invalid(fmt::format("must be a number (got {})", quote(text)));
  }
  return value;
}

std::string format_number(double value) {
  std::string out = fmt::format("{}", value);
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

void check_address(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return Invalid(fmt::format("{}; write host:port such as 127.0.0.1:8432 or [::1]:8432 (got {})", why, quote(text)));
  };
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) throw bad("has no port");
  const std::string_view host = text.substr(0, colon);
  const std::string_view port = text.substr(colon + 1);
  if (host.empty()) throw bad("has no host (0.0.0.0 listens everywhere)");
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') throw bad("has an unterminated [IPv6] host");
  } else if (host.find(':') != std::string_view::npos) {
    throw bad("has an IPv6 host without brackets");
  }
  if (host.find_first_of(" \t") != std::string_view::npos) throw bad("has a space in the host");
  std::size_t i = 0;
  std::uint64_t number = 0;
  if (!read_digits(port, i, number) || i != port.size() || number == 0 || number > 65535) {
    throw bad("needs a port between 1 and 65535");
  }
}

void check_choice(std::string_view text, const std::vector<std::string>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), text) != allowed.end()) return;
  std::string list;
  for (const auto& word : allowed) list += (list.empty() ? "" : ", ") + word;
  std::string hint;
  if (const auto close = closest(text, allowed)) hint = fmt::format("; did you mean {}?", *close);
  throw Invalid(fmt::format("must be one of {} (got {}){}", list, quote(text), hint));
}

}  // namespace pgoutbox::config::detail
