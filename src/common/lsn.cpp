#include "pgoutbox/lsn.h"

#include <charconv>

#include <fmt/format.h>

namespace pgoutbox {

std::string Lsn::to_string() const {
  return fmt::format("{:X}/{:X}", static_cast<std::uint32_t>(value >> 32), static_cast<std::uint32_t>(value));
}

std::optional<Lsn> Lsn::parse(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == text.size()) return std::nullopt;
  const auto half = [](std::string_view part) -> std::optional<std::uint32_t> {
    if (part.size() > 8) return std::nullopt;
    std::uint32_t out = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out, 16);
    if (ec != std::errc{} || end != part.data() + part.size()) return std::nullopt;
    return out;
  };
  const auto hi = half(text.substr(0, slash));
  const auto lo = half(text.substr(slash + 1));
  if (!hi || !lo) return std::nullopt;
  return Lsn{(std::uint64_t{*hi} << 32) | *lo};
}

}  // namespace pgoutbox
