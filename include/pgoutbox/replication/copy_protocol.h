#pragma once

// The CopyBoth sub-protocol of a logical walsender (docs/pgoutput.md §2; postgres walsender.c,
// pg_recvlogical.c): server→client XLogData 'w' and keepalive 'k', client→server standby
// status update 'r'. Pure parsing and building, no I/O.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <variant>

#include "pgoutbox/lsn.h"

namespace pgoutbox::replication {

// 'w': Int64 start · Int64 walEnd · Int64 sendTime · payload (one pgoutput message)
struct XLogData {
  Lsn start;
  Lsn wal_end;
  std::int64_t send_time = 0;
  std::span<const std::byte> payload;
};

// 'k': Int64 walEnd · Int64 sendTime · Byte1 replyRequested
struct Keepalive {
  Lsn wal_end;
  std::int64_t send_time = 0;
  bool reply_requested = false;
};

struct UnknownCopyMessage {
  char type = 0;
  std::size_t size = 0;
};

using CopyMessage = std::variant<XLogData, Keepalive, UnknownCopyMessage>;

// nullopt when the message is shorter than its fixed header.
std::optional<CopyMessage> parse_copy_message(std::span<const std::byte> bytes);

// 'r': Int64 write · Int64 flush · Int64 apply · Int64 clientTime · Byte1 replyRequested
inline constexpr std::size_t kStatusUpdateSize = 1 + 8 * 4 + 1;
std::array<std::byte, kStatusUpdateSize> build_status_update(Lsn write, Lsn flush, Lsn apply,
                                                             std::chrono::system_clock::time_point now,
                                                             bool reply_requested = false);

// Postgres's TimestampTz for a wall-clock time: microseconds since 2000-01-01 UTC.
std::int64_t to_pg_timestamp(std::chrono::system_clock::time_point t);

}  // namespace pgoutbox::replication
