#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pgoutbox {

// A WAL position (XLogRecPtr). Postgres prints it as two 32-bit hex halves: "16/B374D848".
struct Lsn {
  std::uint64_t value = 0;

  constexpr auto operator<=>(const Lsn&) const = default;
  constexpr bool is_zero() const { return value == 0; }

  std::string to_string() const;
  // Parses "X/Y" as printed by Postgres; nullopt on anything else.
  static std::optional<Lsn> parse(std::string_view text);
};

}  // namespace pgoutbox
