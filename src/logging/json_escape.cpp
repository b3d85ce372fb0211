// JSON string contents (RFC 8259 §7): '"', '\' and the control characters U+0000–U+001F must be
// escaped; everything else may appear as UTF-8. Log messages carry text from Postgres, Kafka and
// the outbox rows themselves, which need not be UTF-8 (SQL_ASCII databases, bytea ids): a byte
// that does not start a well-formed sequence (RFC 3629 §4, no overlongs, no surrogates) becomes
// U+FFFD, so that every line stays valid JSON.
#include <array>
#include <cstddef>
#include <cstdint>

#include "pgoutbox/logging/logging.h"
#include "utf8.h"

namespace pgoutbox::logging {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

}  // namespace

std::size_t detail::utf8_sequence_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) -> std::uint8_t {
    return i + k < text.size() ? static_cast<std::uint8_t>(text[i + k]) : 0;
  };
  const auto in = [](std::uint8_t b, std::uint8_t lo, std::uint8_t hi) { return b >= lo && b <= hi; };
  const std::uint8_t lead = byte(0);
  if (in(lead, 0xC2, 0xDF)) return in(byte(1), 0x80, 0xBF) ? 2 : 0;
  if (in(lead, 0xE0, 0xEF)) {
    const std::uint8_t lo = lead == 0xE0 ? 0xA0 : 0x80;
    const std::uint8_t hi = lead == 0xED ? 0x9F : 0xBF;  // 0xED A0..BF would be a surrogate
    return in(byte(1), lo, hi) && in(byte(2), 0x80, 0xBF) ? 3 : 0;
  }
  if (in(lead, 0xF0, 0xF4)) {
    const std::uint8_t lo = lead == 0xF0 ? 0x90 : 0x80;
    const std::uint8_t hi = lead == 0xF4 ? 0x8F : 0xBF;  // nothing above U+10FFFF
    return in(byte(1), lo, hi) && in(byte(2), 0x80, 0xBF) && in(byte(3), 0x80, 0xBF) ? 4 : 0;
  }
  return 0;
}

void append_json_escaped(std::string& out, std::string_view text) {
  static constexpr std::array<char, 16> kHex = {'0', '1', '2', '3', '4', '5', '6', '7',
                                                '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};
  out.reserve(out.size() + text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const std::size_t n = detail::utf8_sequence_length(text, i);
      if (n == 0) {
        out += kReplacement;
        ++i;
      } else if (n == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) <= 0x9F) {
        // A C1 control (U+0080-U+009F): escaped as C0 ones are, since a terminal acts on them
        // (U+009B is CSI).
        const auto code = static_cast<unsigned char>(text[i + 1]);
        out += "\\u00";
        out += kHex[code >> 4];
        out += kHex[code & 0xF];
        i += n;
      } else {
        out.append(text.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xF];
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
}

}  // namespace pgoutbox::logging
