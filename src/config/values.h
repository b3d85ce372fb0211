#pragma once

// Parsers for the scalar types of the configuration. They throw Invalid with the problem only;
// the loader adds where it was written and which key it is.

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace pgoutbox::config::detail {

struct Invalid : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "'text'" for messages: control characters escaped, long values cut.
std::string quote(std::string_view text);

bool parse_bool(std::string_view text);

// One or more <integer><unit> groups, unit ms, s, m or h ("500ms", "1m30s"). Positive, at most
// a year: later code adds them to clock readings.
std::chrono::milliseconds parse_duration(std::string_view text);
std::string format_duration(std::chrono::milliseconds value);

// Bytes, with an optional B, KiB, MiB, GiB or TiB suffix ("64MiB").
std::uint64_t parse_size(std::string_view text);
std::string format_size(std::uint64_t bytes);

// A plain decimal integer.
std::uint64_t parse_count(std::string_view text);

// A finite decimal number.
double parse_number(std::string_view text);
std::string format_number(double value);

// host:port or [ipv6]:port, port 1-65535.
void check_address(std::string_view text);

// One of the allowed words, with a suggestion when the text is close to one.
void check_choice(std::string_view text, const std::vector<std::string>& allowed);

}  // namespace pgoutbox::config::detail
