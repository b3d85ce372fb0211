#include "pgoutbox/replication/copy_protocol.h"

namespace pgoutbox::replication {
namespace {

std::uint64_t read_u64(std::span<const std::byte> b, std::size_t at) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8; ++i) v = (v << 8) | std::to_integer<std::uint64_t>(b[at + i]);
  return v;
}

void write_u64(std::byte* out, std::uint64_t v) {
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<std::byte>(v & 0xFFU);
    v >>= 8;
  }
}

constexpr std::int64_t kPgEpochMicros = 946'684'800LL * 1'000'000LL;

}  // namespace

std::optional<CopyMessage> parse_copy_message(std::span<const std::byte> bytes) {
  if (bytes.empty()) return std::nullopt;
  const char type = static_cast<char>(bytes[0]);
  switch (type) {
    case 'w': {
      constexpr std::size_t kHeader = 1 + 8 + 8 + 8;
      if (bytes.size() < kHeader) return std::nullopt;
      return XLogData{Lsn{read_u64(bytes, 1)}, Lsn{read_u64(bytes, 9)}, static_cast<std::int64_t>(read_u64(bytes, 17)),
                      bytes.subspan(kHeader)};
    }
    case 'k': {
      constexpr std::size_t kSize = 1 + 8 + 8 + 1;
      if (bytes.size() < kSize) return std::nullopt;
      return Keepalive{Lsn{read_u64(bytes, 1)}, static_cast<std::int64_t>(read_u64(bytes, 9)),
                       bytes[17] != std::byte{0}};
    }
    default:
      return UnknownCopyMessage{type, bytes.size()};
  }
}

std::int64_t to_pg_timestamp(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count() - kPgEpochMicros;
}

std::array<std::byte, kStatusUpdateSize> build_status_update(Lsn write, Lsn flush, Lsn apply,
                                                             std::chrono::system_clock::time_point now,
                                                             bool reply_requested) {
  std::array<std::byte, kStatusUpdateSize> out{};
  out[0] = std::byte{'r'};
  write_u64(&out[1], write.value);
  write_u64(&out[9], flush.value);
  write_u64(&out[17], apply.value);
  write_u64(&out[25], static_cast<std::uint64_t>(to_pg_timestamp(now)));
  out[33] = reply_requested ? std::byte{1} : std::byte{0};
  return out;
}

}  // namespace pgoutbox::replication
