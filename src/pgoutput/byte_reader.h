#pragma once

// Bounds-checked reader over the bytes of one pgoutput message (private to the decoder).
//
// pgoutput writes with pq_sendint8/16/32/64 and pq_sendstring (postgres libpq/pqformat.c):
// integers are big-endian, strings are NUL-terminated, and byte strings are an Int32 length
// followed by that many bytes (docs/pgoutput.md §3). Every read here either succeeds or records
// the first fault (what went wrong, at which offset, in which field) and returns false, so a
// truncated or hostile message can never make the decoder look past the end of its input.
// Field names are static strings: recording a fault allocates nothing; the decoder turns it
// into a DecodeError reason only once, on the error path.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace pgoutbox::pgoutput::detail {

enum class Fault : std::uint8_t {
  none,
  truncated,        // a fixed-size field runs past the end
  unterminated,     // a String has no NUL before the end
  negative,         // a signed length or count below zero
  too_large,        // a length or count that the remaining bytes cannot hold
  unexpected_byte,  // a marker or kind byte outside the allowed set
  trailing,         // bytes left after a complete message
};

struct FaultInfo {
  Fault fault = Fault::none;
  std::size_t offset = 0;     // start of the offending field
  const char* type = "";      // wire type as the protocol docs name it: "Int64", "String", …
  const char* field = "";     // field name, after proto.c / messages.h
  int index = -1;             // element number for repeated fields, -1 otherwise
  std::int64_t value = 0;     // the offending length/count, or the unexpected byte
  std::size_t needed = 0;     // too_large: bytes the value implies at minimum
  std::size_t available = 0;  // too_large / trailing: bytes left
  const char* expected = "";  // unexpected_byte: the allowed bytes, for the reason text
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const std::byte> bytes) noexcept : data_(bytes.data()), size_(bytes.size()) {}

  std::size_t offset() const noexcept { return pos_; }
  std::size_t remaining() const noexcept { return size_ - pos_; }
  const FaultInfo& fault() const noexcept { return fault_; }

  bool int8(std::uint8_t& out, const char* field, int index = -1) noexcept {
    return integer(out, "Int8", field, index);
  }
  bool int16(std::uint16_t& out, const char* field, int index = -1) noexcept {
    return integer(out, "Int16", field, index);
  }
  bool int32(std::uint32_t& out, const char* field, int index = -1) noexcept {
    return integer(out, "Int32", field, index);
  }
  bool int64(std::uint64_t& out, const char* field, int index = -1) noexcept {
    return integer(out, "Int64", field, index);
  }
  // Int32 fields that Postgres declares signed (lengths, counts, typmod, timestamps are Int64).
  bool int32(std::int32_t& out, const char* field, int index = -1) noexcept {
    std::uint32_t raw = 0;
    if (!int32(raw, field, index)) return false;
    out = static_cast<std::int32_t>(raw);  // two's complement, defined since C++20
    return true;
  }
  bool int64(std::int64_t& out, const char* field, int index = -1) noexcept {
    std::uint64_t raw = 0;
    if (!int64(raw, field, index)) return false;
    out = static_cast<std::int64_t>(raw);
    return true;
  }

  // pq_getmsgstring: the bytes up to the next NUL, which is consumed but not returned.
  bool string(std::string_view& out, const char* field, int index = -1) noexcept {
    const auto* begin = data_ + pos_;
    const void* nul = remaining() == 0 ? nullptr : std::memchr(begin, 0, remaining());
    if (nul == nullptr) return fail_at(pos_, Fault::unterminated, "String", field, index);
    const auto length = static_cast<std::size_t>(static_cast<const std::byte*>(nul) - begin);
    out = std::string_view(reinterpret_cast<const char*>(begin), length);
    pos_ += length + 1;
    return true;
  }

  // Int32 length, then that many bytes (tuple column values, Message content).
  bool counted_bytes(std::string_view& out, const char* field, int index = -1) noexcept {
    const std::size_t at = pos_;
    std::int32_t length = 0;
    if (!int32(length, field, index)) return false;
    if (length < 0) return fail_value(at, Fault::negative, "Int32", field, index, length);
    const auto n = static_cast<std::size_t>(length);
    if (n > remaining()) return fail_count(at, "Int32", field, index, length, n);
    out = std::string_view(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return true;
  }

  // A count read at `at` promises at least count × min_element_size more bytes; refuse it
  // before reserving memory for it, so hostile input cannot make the decoder allocate more than
  // the message could ever fill.
  bool check_count(std::size_t at, const char* type, const char* field, std::int64_t count,
                   std::size_t min_element_size) noexcept {
    if (count < 0) return fail_value(at, Fault::negative, type, field, -1, count);
    const auto needed = static_cast<std::size_t>(count) * min_element_size;  // count ≤ 2^31, no overflow
    if (needed > remaining()) return fail_count(at, type, field, -1, count, needed);
    return true;
  }

  bool unexpected(std::size_t at, const char* field, std::uint8_t byte, const char* expected, int index = -1) noexcept {
    fail_value(at, Fault::unexpected_byte, "Byte1", field, index, byte);
    fault_.expected = expected;
    return false;
  }

  // A message is exactly its fields: anything after them means the layout we decoded is not
  // the one the server wrote (wrong protocol options, or corruption).
  bool expect_end() noexcept {
    if (remaining() == 0) return true;
    fail_at(pos_, Fault::trailing, "", "", -1);
    fault_.available = remaining();
    return false;
  }

 private:
  template <typename T>
  bool integer(T& out, const char* type, const char* field, int index) noexcept {
    if (remaining() < sizeof(T)) return fail_at(pos_, Fault::truncated, type, field, index);
    T value = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
      value =
          static_cast<T>((static_cast<std::uint64_t>(value) << 8U) | std::to_integer<std::uint8_t>(data_[pos_ + i]));
    }
    out = value;
    pos_ += sizeof(T);
    return true;
  }

  bool fail_at(std::size_t at, Fault fault, const char* type, const char* field, int index) noexcept {
    fault_ = FaultInfo{};
    fault_.fault = fault;
    fault_.offset = at;
    fault_.type = type;
    fault_.field = field;
    fault_.index = index;
    return false;
  }
  bool fail_value(std::size_t at, Fault fault, const char* type, const char* field, int index,
                  std::int64_t value) noexcept {
    fail_at(at, fault, type, field, index);
    fault_.value = value;
    return false;
  }
  bool fail_count(std::size_t at, const char* type, const char* field, int index, std::int64_t value,
                  std::size_t needed) noexcept {
    fail_value(at, Fault::too_large, type, field, index, value);
    fault_.needed = needed;
    fault_.available = remaining();
    return false;
  }

  const std::byte* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
  FaultInfo fault_;
};

}  // namespace pgoutbox::pgoutput::detail
