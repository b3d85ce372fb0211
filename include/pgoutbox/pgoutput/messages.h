#pragma once

// Typed pgoutput messages, protocol versions 1–4, named after Postgres's own structs in
// src/include/replication/logicalproto.h (LogicalRepBeginData, LogicalRepRelation, …).
// Layouts: docs/pgoutput.md §3 and postgres src/backend/replication/logical/proto.c.
//
// Every std::string_view points into the bytes that were decoded: the caller keeps that
// buffer alive while it uses the message (no copies on the hot path).

#include <cstdint>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

#include "pgoutbox/lsn.h"

namespace pgoutbox::pgoutput {

// Microseconds since 2000-01-01 00:00:00 UTC (Postgres's TimestampTz).
using PgTimestamp = std::int64_t;
inline constexpr std::int64_t kPgEpochUnixSeconds = 946'684'800;
inline std::int64_t to_unix_micros(PgTimestamp ts) { return ts + kPgEpochUnixSeconds * 1'000'000; }

using Xid = std::uint32_t;
using Oid = std::uint32_t;

// 'B'
struct BeginData {
  Lsn final_lsn;  // the commit record's LSN
  PgTimestamp commit_time = 0;
  Xid xid = 0;
};

// 'C'
struct CommitData {
  std::uint8_t flags = 0;
  Lsn commit_lsn;
  Lsn end_lsn;  // what a client confirms once the transaction is durably handled
  PgTimestamp commit_time = 0;
};

// 'O'
struct OriginData {
  Lsn origin_lsn;
  std::string_view name;
};

struct RelationColumn {
  std::uint8_t flags = 0;  // 1: part of the replica identity key
  std::string_view name;
  Oid type_oid = 0;
  std::int32_t typmod = -1;
};

// 'R'
struct RelationData {
  std::optional<Xid> xid;  // only inside a stream block
  Oid relid = 0;
  std::string_view nspname;  // "" means pg_catalog
  std::string_view relname;
  char replident = 'd';
  std::vector<RelationColumn> columns;
};

// 'Y'
struct TypeData {
  std::optional<Xid> xid;
  Oid oid = 0;
  std::string_view nspname;
  std::string_view typname;
};

enum class ColumnKind : char {
  null = 'n',
  unchanged_toast = 'u',
  text = 't',
  binary = 'b',
};

struct ColumnValue {
  ColumnKind kind = ColumnKind::null;
  std::string_view bytes;  // empty for null and unchanged_toast
};

// TupleData: the published columns in Relation order.
struct TupleData {
  std::vector<ColumnValue> columns;
};

// 'I'
struct InsertData {
  std::optional<Xid> xid;
  Oid relid = 0;
  TupleData new_tuple;
};

// 'U'
struct UpdateData {
  std::optional<Xid> xid;
  Oid relid = 0;
  char old_kind = 0;  // 0 (no old tuple), 'K' (key columns) or 'O' (whole old row)
  std::optional<TupleData> old_tuple;
  TupleData new_tuple;
};

// 'D'
struct DeleteData {
  std::optional<Xid> xid;
  Oid relid = 0;
  char old_kind = 'K';  // 'K' or 'O'
  TupleData old_tuple;
};

// 'T'
struct TruncateData {
  std::optional<Xid> xid;
  std::uint8_t options = 0;  // 1 cascade, 2 restart identity
  std::vector<Oid> relids;
};

// 'M' — pg_logical_emit_message(transactional, prefix, content)
struct MessageData {
  std::optional<Xid> xid;
  std::uint8_t flags = 0;  // 1: transactional
  Lsn lsn;
  std::string_view prefix;
  std::string_view content;
  bool transactional() const { return (flags & 1U) != 0; }
};

// 'S'
struct StreamStartData {
  Xid xid = 0;
  bool first_segment = false;
};

// 'E'
struct StreamStopData {};

// 'c'
struct StreamCommitData {
  Xid xid = 0;
  std::uint8_t flags = 0;
  Lsn commit_lsn;
  Lsn end_lsn;
  PgTimestamp commit_time = 0;
};

// 'A'
struct StreamAbortData {
  Xid xid = 0;
  Xid subxid = 0;
  // Only with streaming = parallel (protocol 4).
  std::optional<Lsn> abort_lsn;
  std::optional<PgTimestamp> abort_time;
};

// Two-phase messages (protocol 3+), decoded but not acted on by pgoutbox.
// 'b'
struct BeginPrepareData {
  Lsn prepare_lsn;
  Lsn end_lsn;
  PgTimestamp prepare_time = 0;
  Xid xid = 0;
  std::string_view gid;
};

// 'P' (Prepare) and 'p' (Stream Prepare) share a layout.
struct PrepareData {
  bool streamed = false;  // true for 'p'
  std::uint8_t flags = 0;
  Lsn prepare_lsn;
  Lsn end_lsn;
  PgTimestamp prepare_time = 0;
  Xid xid = 0;
  std::string_view gid;
};

// 'K'
struct CommitPreparedData {
  std::uint8_t flags = 0;
  Lsn commit_lsn;
  Lsn end_lsn;
  PgTimestamp commit_time = 0;
  Xid xid = 0;
  std::string_view gid;
};

// 'r'
struct RollbackPreparedData {
  std::uint8_t flags = 0;
  Lsn prepare_end_lsn;
  Lsn rollback_end_lsn;
  PgTimestamp prepare_time = 0;
  PgTimestamp rollback_time = 0;
  Xid xid = 0;
  std::string_view gid;
};

using Message = std::variant<BeginData, CommitData, OriginData, RelationData, TypeData, InsertData, UpdateData,
                             DeleteData, TruncateData, MessageData, StreamStartData, StreamStopData, StreamCommitData,
                             StreamAbortData, BeginPrepareData, PrepareData, CommitPreparedData, RollbackPreparedData>;

}  // namespace pgoutbox::pgoutput
