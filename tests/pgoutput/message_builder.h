#pragma once

// Test-only writer of pgoutput messages, built from the wire layouts (docs/pgoutput.md §3, postgres
// proto.c logicalrep_write_*), never from the decoder: big-endian integers as pq_sendint*
// writes them, NUL-terminated strings as pq_sendstring, and TupleData columns.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace pgoutbox::pgoutput::testing {

using Bytes = std::vector<std::byte>;

class MessageBuilder {
 public:
  explicit MessageBuilder(char type) { int8(static_cast<std::uint8_t>(type)); }

  MessageBuilder& int8(std::uint8_t v) { return big_endian(v, 1); }
  MessageBuilder& int16(std::uint16_t v) { return big_endian(v, 2); }
  MessageBuilder& int32(std::uint32_t v) { return big_endian(v, 4); }
  MessageBuilder& int64(std::uint64_t v) { return big_endian(v, 8); }
  MessageBuilder& raw(std::string_view s) {
    for (const char c : s) bytes_.push_back(static_cast<std::byte>(c));
    return *this;
  }
  MessageBuilder& string(std::string_view s) { return raw(s).int8(0); }

  // TupleData column kinds: 'n' NULL, 'u' unchanged TOAST, 't' text, 'b' binary.
  MessageBuilder& null_column() { return int8('n'); }
  MessageBuilder& unchanged_column() { return int8('u'); }
  MessageBuilder& text_column(std::string_view v) {
    return int8('t').int32(static_cast<std::uint32_t>(v.size())).raw(v);
  }
  MessageBuilder& binary_column(std::string_view v) {
    return int8('b').int32(static_cast<std::uint32_t>(v.size())).raw(v);
  }

  // Relation column: Int8 flags, String name, Int32 type oid, Int32 typmod.
  MessageBuilder& relation_column(std::uint8_t flags, std::string_view name, std::uint32_t type_oid,
                                  std::int32_t typmod) {
    return int8(flags).string(name).int32(type_oid).int32(static_cast<std::uint32_t>(typmod));
  }

  std::size_t size() const { return bytes_.size(); }
  Bytes build() const { return bytes_; }
  operator Bytes() const { return bytes_; }  // NOLINT: lets a builder chain end where Bytes is expected

 private:
  MessageBuilder& big_endian(std::uint64_t v, int width) {
    for (int shift = 8 * (width - 1); shift >= 0; shift -= 8) {
      bytes_.push_back(static_cast<std::byte>((v >> shift) & 0xFFU));
    }
    return *this;
  }

  Bytes bytes_;
};

// "4200ff" -> {0x42, 0x00, 0xff}: fixtures pasted from encode(data, 'hex').
inline Bytes from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) throw std::invalid_argument("odd hex length");
  const auto nibble = [](char c) -> unsigned {
    if (c >= '0' && c <= '9') return static_cast<unsigned>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<unsigned>(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return static_cast<unsigned>(c - 'A' + 10);
    throw std::invalid_argument("bad hex digit");
  };
  Bytes out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    out.push_back(static_cast<std::byte>((nibble(hex[i]) << 4U) | nibble(hex[i + 1])));
  }
  return out;
}

}  // namespace pgoutbox::pgoutput::testing
