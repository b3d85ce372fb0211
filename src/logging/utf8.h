#pragma once

// UTF-8 as both log formats read it (RFC 3629 §4: no overlongs, no surrogates, nothing above
// U+10FFFF).

#include <cstddef>
#include <string_view>

namespace pgoutbox::logging::detail {

// Length of the well-formed UTF-8 sequence of 2 to 4 bytes starting at text[i], or 0 when there
// is none there.
std::size_t utf8_sequence_length(std::string_view text, std::size_t i);

}  // namespace pgoutbox::logging::detail
