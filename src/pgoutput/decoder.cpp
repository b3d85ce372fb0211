#include "pgoutbox/pgoutput/decoder.h"

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "byte_reader.h"

// Layouts follow the logicalrep_write_* / logicalrep_read_* pairs in postgres
// src/backend/replication/logical/proto.c (REL_15_STABLE to REL_17_STABLE), summarised in
// docs/pgoutput.md §3. The decoder checks the layout only; semantic checks Postgres's own apply
// worker makes (flags == 0, non-zero LSNs) are left to the consumer, so a future flag bit is
// not a decode error.

namespace pgoutbox::pgoutput {

namespace {

using detail::ByteReader;
using detail::Fault;
using detail::FaultInfo;

// Inside a Stream Start…Stop block, pgoutput writes the (sub)transaction's xid before the body
// of R/Y/I/U/D/T/M ("if not valid, we're not streaming" in every logicalrep_write_* of proto.c).
bool read_stream_xid(ByteReader& r, const DecodeOptions& options, std::optional<Xid>& out) {
  if (!options.in_stream) return true;
  Xid xid = 0;
  if (!r.int32(xid, "xid")) return false;
  out = xid;
  return true;
}

bool read_lsn(ByteReader& r, Lsn& out, const char* field) { return r.int64(out.value, field); }

// TupleData (logicalrep_write_tuple): Int16 ncols, then per column a kind byte and, for 't' and
// 'b', an Int32 length and the value. ncols is written as uint16 (nliveatts).
bool read_tuple(ByteReader& r, TupleData& out) {
  const std::size_t ncols_at = r.offset();
  std::uint16_t ncols = 0;
  if (!r.int16(ncols, "ncols")) return false;
  // Every column takes at least its kind byte.
  if (!r.check_count(ncols_at, "Int16", "ncols", ncols, 1)) return false;
  out.columns.reserve(ncols);
  for (int i = 0; i < ncols; ++i) {
    const std::size_t kind_at = r.offset();
    std::uint8_t kind = 0;
    if (!r.int8(kind, "column_kind", i)) return false;
    switch (kind) {
      case 'n':
        out.columns.push_back(ColumnValue{ColumnKind::null, {}});
        break;
      case 'u':
        // An unchanged TOASTed value: the server sends no bytes for it.
        out.columns.push_back(ColumnValue{ColumnKind::unchanged_toast, {}});
        break;
      case 't':
      case 'b': {
        std::string_view value;
        if (!r.counted_bytes(value, "column_length", i)) return false;
        out.columns.push_back(ColumnValue{static_cast<ColumnKind>(kind), value});
        break;
      }
      default:
        return r.unexpected(kind_at, "column_kind", kind, "'n', 'u', 't' or 'b'", i);
    }
  }
  return true;
}

// Insert carries exactly one tuple, introduced by 'N'.
bool read_new_tuple(ByteReader& r, TupleData& out) {
  const std::size_t at = r.offset();
  std::uint8_t marker = 0;
  if (!r.int8(marker, "tuple_marker")) return false;
  if (marker != 'N') return r.unexpected(at, "tuple_marker", marker, "'N'");
  return read_tuple(r, out);
}

bool read_begin(ByteReader& r, const DecodeOptions&, BeginData& out) {
  return read_lsn(r, out.final_lsn, "final_lsn") && r.int64(out.commit_time, "commit_time") && r.int32(out.xid, "xid");
}

bool read_commit(ByteReader& r, const DecodeOptions&, CommitData& out) {
  return r.int8(out.flags, "flags") && read_lsn(r, out.commit_lsn, "commit_lsn") &&
         read_lsn(r, out.end_lsn, "end_lsn") && r.int64(out.commit_time, "commit_time");
}

bool read_origin(ByteReader& r, const DecodeOptions&, OriginData& out) {
  return read_lsn(r, out.origin_lsn, "origin_lsn") && r.string(out.name, "name");
}

bool read_relation(ByteReader& r, const DecodeOptions& options, RelationData& out) {
  std::uint8_t replident = 0;
  if (!(read_stream_xid(r, options, out.xid) && r.int32(out.relid, "relid") && r.string(out.nspname, "nspname") &&
        r.string(out.relname, "relname") && r.int8(replident, "replident"))) {
    return false;
  }
  out.replident = static_cast<char>(replident);
  const std::size_t ncols_at = r.offset();
  std::uint16_t ncols = 0;
  if (!r.int16(ncols, "ncols")) return false;
  // logicalrep_write_attrs: Int8 flags, String name (≥ 1 byte), Int32 type oid, Int32 typmod.
  constexpr std::size_t kMinColumnBytes = 1 + 1 + 4 + 4;
  if (!r.check_count(ncols_at, "Int16", "ncols", ncols, kMinColumnBytes)) return false;
  out.columns.resize(ncols);
  for (int i = 0; i < ncols; ++i) {
    auto& column = out.columns[static_cast<std::size_t>(i)];
    if (!(r.int8(column.flags, "column_flags", i) && r.string(column.name, "column_name", i) &&
          r.int32(column.type_oid, "column_type_oid", i) && r.int32(column.typmod, "column_typmod", i))) {
      return false;
    }
  }
  return true;
}

bool read_type(ByteReader& r, const DecodeOptions& options, TypeData& out) {
  return read_stream_xid(r, options, out.xid) && r.int32(out.oid, "oid") && r.string(out.nspname, "nspname") &&
         r.string(out.typname, "typname");
}

bool read_insert(ByteReader& r, const DecodeOptions& options, InsertData& out) {
  return read_stream_xid(r, options, out.xid) && r.int32(out.relid, "relid") && read_new_tuple(r, out.new_tuple);
}

// Update: 'K' (replica identity key changed) or 'O' (REPLICA IDENTITY FULL) with the old
// tuple, or neither; then 'N' and the new tuple (logicalrep_write_update).
bool read_update(ByteReader& r, const DecodeOptions& options, UpdateData& out) {
  if (!(read_stream_xid(r, options, out.xid) && r.int32(out.relid, "relid"))) return false;
  std::size_t at = r.offset();
  std::uint8_t marker = 0;
  if (!r.int8(marker, "tuple_marker")) return false;
  if (marker == 'K' || marker == 'O') {
    out.old_kind = static_cast<char>(marker);
    if (!read_tuple(r, out.old_tuple.emplace())) return false;
    at = r.offset();
    if (!r.int8(marker, "new_tuple_marker")) return false;
    if (marker != 'N') return r.unexpected(at, "new_tuple_marker", marker, "'N'");
  } else if (marker != 'N') {
    return r.unexpected(at, "tuple_marker", marker, "'K', 'O' or 'N'");
  }
  return read_tuple(r, out.new_tuple);
}

// Delete always carries the old key ('K') or the whole old row ('O').
bool read_delete(ByteReader& r, const DecodeOptions& options, DeleteData& out) {
  if (!(read_stream_xid(r, options, out.xid) && r.int32(out.relid, "relid"))) return false;
  const std::size_t at = r.offset();
  std::uint8_t marker = 0;
  if (!r.int8(marker, "tuple_marker")) return false;
  if (marker != 'K' && marker != 'O') return r.unexpected(at, "tuple_marker", marker, "'K' or 'O'");
  out.old_kind = static_cast<char>(marker);
  return read_tuple(r, out.old_tuple);
}

// Truncate: Int32 nrelids (a C int, so signed), Int8 flags, nrelids × Int32 relid.
bool read_truncate(ByteReader& r, const DecodeOptions& options, TruncateData& out) {
  if (!read_stream_xid(r, options, out.xid)) return false;
  const std::size_t nrels_at = r.offset();
  std::int32_t nrels = 0;
  if (!(r.int32(nrels, "nrelids") && r.int8(out.options, "options"))) return false;
  if (!r.check_count(nrels_at, "Int32", "nrelids", nrels, 4)) return false;
  out.relids.resize(static_cast<std::size_t>(nrels));
  for (int i = 0; i < nrels; ++i) {
    if (!r.int32(out.relids[static_cast<std::size_t>(i)], "relid", i)) return false;
  }
  return true;
}

// Message (logicalrep_write_message): [xid] before the flags, content is Int32 length + bytes.
bool read_message(ByteReader& r, const DecodeOptions& options, MessageData& out) {
  return read_stream_xid(r, options, out.xid) && r.int8(out.flags, "flags") && read_lsn(r, out.lsn, "lsn") &&
         r.string(out.prefix, "prefix") && r.counted_bytes(out.content, "content_length");
}

bool read_stream_start(ByteReader& r, const DecodeOptions&, StreamStartData& out) {
  std::uint8_t first_segment = 0;
  if (!(r.int32(out.xid, "xid") && r.int8(first_segment, "first_segment"))) return false;
  // logicalrep_read_stream_start treats exactly 1 as the first segment.
  out.first_segment = first_segment == 1;
  return true;
}

bool read_stream_stop(ByteReader&, const DecodeOptions&, StreamStopData&) { return true; }

bool read_stream_commit(ByteReader& r, const DecodeOptions&, StreamCommitData& out) {
  return r.int32(out.xid, "xid") && r.int8(out.flags, "flags") && read_lsn(r, out.commit_lsn, "commit_lsn") &&
         read_lsn(r, out.end_lsn, "end_lsn") && r.int64(out.commit_time, "commit_time");
}

// abort_lsn and abort_time exist only with streaming = parallel (protocol 4, PG16+):
// pgoutput_stream_abort passes write_abort_info = (streaming == LOGICALREP_STREAM_PARALLEL).
bool read_stream_abort(ByteReader& r, const DecodeOptions& options, StreamAbortData& out) {
  if (!(r.int32(out.xid, "xid") && r.int32(out.subxid, "subxid"))) return false;
  if (!options.parallel_streaming) return true;
  Lsn abort_lsn;
  PgTimestamp abort_time = 0;
  if (!(read_lsn(r, abort_lsn, "abort_lsn") && r.int64(abort_time, "abort_time"))) return false;
  out.abort_lsn = abort_lsn;
  out.abort_time = abort_time;
  return true;
}

bool read_begin_prepare(ByteReader& r, const DecodeOptions&, BeginPrepareData& out) {
  return read_lsn(r, out.prepare_lsn, "prepare_lsn") && read_lsn(r, out.end_lsn, "end_lsn") &&
         r.int64(out.prepare_time, "prepare_time") && r.int32(out.xid, "xid") && r.string(out.gid, "gid");
}

// 'P' and 'p' share logicalrep_write_prepare_common.
bool read_prepare(ByteReader& r, const DecodeOptions&, PrepareData& out) {
  return r.int8(out.flags, "flags") && read_lsn(r, out.prepare_lsn, "prepare_lsn") &&
         read_lsn(r, out.end_lsn, "end_lsn") && r.int64(out.prepare_time, "prepare_time") && r.int32(out.xid, "xid") &&
         r.string(out.gid, "gid");
}

bool read_stream_prepare(ByteReader& r, const DecodeOptions& options, PrepareData& out) {
  out.streamed = true;
  return read_prepare(r, options, out);
}

bool read_commit_prepared(ByteReader& r, const DecodeOptions&, CommitPreparedData& out) {
  return r.int8(out.flags, "flags") && read_lsn(r, out.commit_lsn, "commit_lsn") &&
         read_lsn(r, out.end_lsn, "end_lsn") && r.int64(out.commit_time, "commit_time") && r.int32(out.xid, "xid") &&
         r.string(out.gid, "gid");
}

bool read_rollback_prepared(ByteReader& r, const DecodeOptions&, RollbackPreparedData& out) {
  return r.int8(out.flags, "flags") && read_lsn(r, out.prepare_end_lsn, "prepare_end_lsn") &&
         read_lsn(r, out.rollback_end_lsn, "rollback_end_lsn") && r.int64(out.prepare_time, "prepare_time") &&
         r.int64(out.rollback_time, "rollback_time") && r.int32(out.xid, "xid") && r.string(out.gid, "gid");
}

std::string byte_repr(std::int64_t byte) {
  if (byte >= 0x20 && byte < 0x7f) return fmt::format("'{}'", static_cast<char>(byte));
  return fmt::format("0x{:02x}", static_cast<unsigned>(byte & 0xff));
}

std::string field_name(const FaultInfo& f) {
  return f.index < 0 ? std::string(f.field) : fmt::format("{}[{}]", f.field, f.index);
}

DecodeError make_error(char kind, const FaultInfo& f) {
  std::string reason;
  switch (f.fault) {
    case Fault::truncated:
      reason = fmt::format("truncated {} {}", f.type, field_name(f));
      break;
    case Fault::unterminated:
      reason = fmt::format("unterminated String {} (no NUL before end of message)", field_name(f));
      break;
    case Fault::negative:
      reason = fmt::format("negative {} {} = {}", f.type, field_name(f), f.value);
      break;
    case Fault::too_large:
      reason = fmt::format("{} {} = {} needs at least {} bytes, {} left", f.type, field_name(f), f.value, f.needed,
                           f.available);
      break;
    case Fault::unexpected_byte:
      reason = fmt::format("{} is {}, expected {}", field_name(f), byte_repr(f.value), f.expected);
      break;
    case Fault::trailing:
      reason = fmt::format("{} trailing byte{} after a complete {} message", f.available, f.available == 1 ? "" : "s",
                           kind_name(kind));
      break;
    case Fault::none:
      reason = "internal error: failure without a recorded fault";
      break;
  }
  return DecodeError{kind, f.offset, std::move(reason)};
}

template <typename T>
DecodeResult decode_as(ByteReader& r, char kind, const DecodeOptions& options,
                       bool (*read)(ByteReader&, const DecodeOptions&, T&)) {
  T data{};
  if (!read(r, options, data) || !r.expect_end()) return make_error(kind, r.fault());
  return Message(std::in_place_type<T>, std::move(data));
}

}  // namespace

DecodeResult decode(std::span<const std::byte> bytes, const DecodeOptions& options) {
  if (bytes.empty()) return DecodeError{0, 0, "empty message"};
  ByteReader r(bytes);
  std::uint8_t type = 0;
  (void)r.int8(type, "type");  // cannot fail: bytes is not empty
  const auto kind = static_cast<char>(type);
  switch (kind) {
    case 'B':
      return decode_as(r, kind, options, read_begin);
    case 'C':
      return decode_as(r, kind, options, read_commit);
    case 'O':
      return decode_as(r, kind, options, read_origin);
    case 'R':
      return decode_as(r, kind, options, read_relation);
    case 'Y':
      return decode_as(r, kind, options, read_type);
    case 'I':
      return decode_as(r, kind, options, read_insert);
    case 'U':
      return decode_as(r, kind, options, read_update);
    case 'D':
      return decode_as(r, kind, options, read_delete);
    case 'T':
      return decode_as(r, kind, options, read_truncate);
    case 'M':
      return decode_as(r, kind, options, read_message);
    case 'S':
      return decode_as(r, kind, options, read_stream_start);
    case 'E':
      return decode_as(r, kind, options, read_stream_stop);
    case 'c':
      return decode_as(r, kind, options, read_stream_commit);
    case 'A':
      return decode_as(r, kind, options, read_stream_abort);
    case 'b':
      return decode_as(r, kind, options, read_begin_prepare);
    case 'P':
      return decode_as(r, kind, options, read_prepare);
    case 'p':
      return decode_as(r, kind, options, read_stream_prepare);
    case 'K':
      return decode_as(r, kind, options, read_commit_prepared);
    case 'r':
      return decode_as(r, kind, options, read_rollback_prepared);
    default:
      return DecodeError{kind, 0, "unknown message type"};
  }
}

const char* kind_name(char type_byte) {
  // Names as in the protocol chapter "Logical Replication Message Formats".
  switch (type_byte) {
    case 'B':
      return "Begin";
    case 'C':
      return "Commit";
    case 'O':
      return "Origin";
    case 'R':
      return "Relation";
    case 'Y':
      return "Type";
    case 'I':
      return "Insert";
    case 'U':
      return "Update";
    case 'D':
      return "Delete";
    case 'T':
      return "Truncate";
    case 'M':
      return "Message";
    case 'S':
      return "Stream Start";
    case 'E':
      return "Stream Stop";
    case 'c':
      return "Stream Commit";
    case 'A':
      return "Stream Abort";
    case 'b':
      return "Begin Prepare";
    case 'P':
      return "Prepare";
    case 'p':
      return "Stream Prepare";
    case 'K':
      return "Commit Prepared";
    case 'r':
      return "Rollback Prepared";
    default:
      return "unknown";
  }
}

std::string DecodeError::to_string() const {
  const auto byte = static_cast<unsigned char>(kind);
  const std::string shown = byte >= 0x20 && byte < 0x7f ? fmt::format("'{}'", kind) : fmt::format("0x{:02x}", byte);
  return fmt::format("pgoutput {} ({}) at offset {}: {}", shown, kind_name(kind), offset, reason);
}

}  // namespace pgoutbox::pgoutput
