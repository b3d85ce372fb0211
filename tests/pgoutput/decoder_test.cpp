// One hand-built vector per message kind and per protocol-dependent variant, every field
// asserted. Layouts: docs/pgoutput.md §3 and postgres proto.c logicalrep_write_*; the builder writes
// them independently of the decoder. Values are chosen so that swapped fields or a wrong byte
// order show up (top bits set, no repeated bytes).

#include <gtest/gtest.h>

#include <cstdint>
#include <string_view>

#include "message_builder.h"
#include "pgoutbox/pgoutput/decoder.h"
#include "test_vectors.h"

namespace pgoutbox::pgoutput::testing {
namespace {

using namespace std::string_view_literals;

constexpr std::uint64_t kLsnA = 0x00000016B374D848ULL;  // 16/B374D848
constexpr std::uint64_t kLsnB = 0x00000016B374D9A0ULL;
constexpr std::uint64_t kLsnC = 0x00000017000000F0ULL;
constexpr std::int64_t kTimeA = 851'234'567'890'123;  // µs since 2000-01-01: 2026-12-23
constexpr std::int64_t kTimeB = 851'234'569'390'124;
constexpr Xid kXid = 0x8000002AU;  // top bit set: xids are unsigned
constexpr Xid kSubXid = 0x8000002BU;
constexpr Oid kRelid = 16385;
constexpr Oid kRelid2 = 0x9ABCDEF0U;

constexpr std::string_view kNonAscii = "h\xC3\xA9llo \xE2\x82\xAC";  // "héllo €" in UTF-8
constexpr std::string_view kBinary = "\x00\xFF\x01"sv;               // embedded NUL

std::uint64_t bits(std::int64_t v) { return static_cast<std::uint64_t>(v); }

// ---- Begin 'B': Int64 final_lsn, Int64 commit_time, Int32 xid
const Bytes& kBegin = register_vector("begin", MessageBuilder('B').int64(kLsnA).int64(bits(kTimeA)).int32(kXid));

TEST(DecodeBegin, ReadsEveryField) {
  const auto m = decode_to<BeginData>(kBegin);
  EXPECT_EQ(m.final_lsn, Lsn{kLsnA});
  EXPECT_EQ(m.commit_time, kTimeA);
  EXPECT_EQ(m.xid, kXid);
}

// ---- Commit 'C': Int8 flags, Int64 commit_lsn, Int64 end_lsn, Int64 commit_time
const Bytes& kCommit =
    register_vector("commit", MessageBuilder('C').int8(0).int64(kLsnA).int64(kLsnB).int64(bits(kTimeA)));

TEST(DecodeCommit, ReadsEveryField) {
  const auto m = decode_to<CommitData>(kCommit);
  EXPECT_EQ(m.flags, 0);
  EXPECT_EQ(m.commit_lsn, Lsn{kLsnA});
  EXPECT_EQ(m.end_lsn, Lsn{kLsnB});
  EXPECT_EQ(m.commit_time, kTimeA);
}

// ---- Origin 'O': Int64 origin_lsn, String name
const Bytes& kOrigin = register_vector("origin", MessageBuilder('O').int64(kLsnC).string("pg_16390"));

TEST(DecodeOrigin, ReadsLsnAndName) {
  const auto m = decode_to<OriginData>(kOrigin);
  EXPECT_EQ(m.origin_lsn, Lsn{kLsnC});
  EXPECT_EQ(m.name, "pg_16390");
  EXPECT_TRUE(points_into(m.name, kOrigin));
}

// ---- Relation 'R': [xid] Int32 relid, String nspname, String relname, Int8 replident,
//      Int16 ncols, ncols × {Int8 flags, String name, Int32 type oid, Int32 typmod}
MessageBuilder relation_body(MessageBuilder b, std::string_view nspname) {
  return b.int32(kRelid)
      .string(nspname)
      .string("commandes_\xC3\xA9t\xC3\xA9")  // "commandes_été"
      .int8('f')
      .int16(3)
      .relation_column(1, "id", 23, -1)
      .relation_column(0, "payload", 3802, -1)
      .relation_column(0, "topic", 1043, 68);  // varchar(64): typmod = 64 + VARHDRSZ
}
const Bytes& kRelation = register_vector("relation", relation_body(MessageBuilder('R'), "public"));
const Bytes& kRelationCatalog = register_vector("relation_pg_catalog", relation_body(MessageBuilder('R'), ""));
const Bytes& kRelationInStream =
    register_vector("relation_in_stream", relation_body(MessageBuilder('R').int32(kSubXid), "public"), kInStream);
const Bytes& kRelationNoColumns = register_vector(
    "relation_no_columns", MessageBuilder('R').int32(kRelid2).string("s").string("t").int8('n').int16(0));

void expect_relation_body(const RelationData& m, const Bytes& bytes) {
  EXPECT_EQ(m.relid, kRelid);
  EXPECT_EQ(m.relname, "commandes_\xC3\xA9t\xC3\xA9");
  EXPECT_EQ(m.replident, 'f');
  ASSERT_EQ(m.columns.size(), 3U);
  EXPECT_EQ(m.columns[0].flags, 1);
  EXPECT_EQ(m.columns[0].name, "id");
  EXPECT_EQ(m.columns[0].type_oid, 23U);
  EXPECT_EQ(m.columns[0].typmod, -1);
  EXPECT_EQ(m.columns[1].flags, 0);
  EXPECT_EQ(m.columns[1].name, "payload");
  EXPECT_EQ(m.columns[1].type_oid, 3802U);
  EXPECT_EQ(m.columns[1].typmod, -1);
  EXPECT_EQ(m.columns[2].flags, 0);
  EXPECT_EQ(m.columns[2].name, "topic");
  EXPECT_EQ(m.columns[2].type_oid, 1043U);
  EXPECT_EQ(m.columns[2].typmod, 68);
  EXPECT_TRUE(points_into(m.relname, bytes));
  EXPECT_TRUE(points_into(m.columns[2].name, bytes));
}

TEST(DecodeRelation, ReadsNamesReplicaIdentityAndColumns) {
  const auto m = decode_to<RelationData>(kRelation);
  EXPECT_FALSE(m.xid.has_value());
  EXPECT_EQ(m.nspname, "public");
  expect_relation_body(m, kRelation);
}

TEST(DecodeRelation, KeepsEmptyNamespaceAsSent) {
  // proto.c sends "" for pg_catalog; the decoder reports the wire value, RelationCache maps it.
  const auto m = decode_to<RelationData>(kRelationCatalog);
  EXPECT_EQ(m.nspname, "");
  expect_relation_body(m, kRelationCatalog);
}

TEST(DecodeRelation, InStreamReadsXidFirst) {
  const auto m = decode_to<RelationData>(kRelationInStream, kInStream);
  EXPECT_EQ(m.xid, kSubXid);
  EXPECT_EQ(m.nspname, "public");
  expect_relation_body(m, kRelationInStream);
}

TEST(DecodeRelation, AcceptsATableWithoutPublishedColumns) {
  const auto m = decode_to<RelationData>(kRelationNoColumns);
  EXPECT_EQ(m.relid, kRelid2);
  EXPECT_EQ(m.nspname, "s");
  EXPECT_EQ(m.relname, "t");
  EXPECT_EQ(m.replident, 'n');
  EXPECT_TRUE(m.columns.empty());
}

// ---- Type 'Y': [xid] Int32 oid, String nspname, String typname
const Bytes& kType = register_vector("type", MessageBuilder('Y').int32(16398).string("public").string("mood"));
const Bytes& kTypeInStream = register_vector(
    "type_in_stream", MessageBuilder('Y').int32(kXid).int32(16398).string("").string("mood"), kInStream);

TEST(DecodeType, ReadsOidAndNames) {
  const auto m = decode_to<TypeData>(kType);
  EXPECT_FALSE(m.xid.has_value());
  EXPECT_EQ(m.oid, 16398U);
  EXPECT_EQ(m.nspname, "public");
  EXPECT_EQ(m.typname, "mood");
}

TEST(DecodeType, InStreamReadsXidFirst) {
  const auto m = decode_to<TypeData>(kTypeInStream, kInStream);
  EXPECT_EQ(m.xid, kXid);
  EXPECT_EQ(m.oid, 16398U);
  EXPECT_EQ(m.nspname, "");
  EXPECT_EQ(m.typname, "mood");
}

// ---- TupleData: Int16 ncols, per column 'n' | 'u' | 't' Int32 len bytes | 'b' Int32 len bytes
MessageBuilder every_column_kind(MessageBuilder b) {
  return b.int16(6)
      .null_column()
      .unchanged_column()
      .text_column(kNonAscii)
      .text_column("")
      .binary_column(kBinary)
      .text_column("42");
}

void expect_every_column_kind(const TupleData& t, const Bytes& bytes) {
  ASSERT_EQ(t.columns.size(), 6U);
  EXPECT_EQ(t.columns[0].kind, ColumnKind::null);
  EXPECT_TRUE(t.columns[0].bytes.empty());
  EXPECT_EQ(t.columns[1].kind, ColumnKind::unchanged_toast);
  EXPECT_TRUE(t.columns[1].bytes.empty());
  EXPECT_EQ(t.columns[2].kind, ColumnKind::text);
  EXPECT_EQ(t.columns[2].bytes, kNonAscii);
  EXPECT_EQ(t.columns[3].kind, ColumnKind::text);
  EXPECT_EQ(t.columns[3].bytes, "");
  EXPECT_EQ(t.columns[4].kind, ColumnKind::binary);
  EXPECT_EQ(t.columns[4].bytes, kBinary);
  EXPECT_EQ(t.columns[5].kind, ColumnKind::text);
  EXPECT_EQ(t.columns[5].bytes, "42");
  EXPECT_TRUE(points_into(t.columns[2].bytes, bytes));
  EXPECT_TRUE(points_into(t.columns[4].bytes, bytes));
}

// Two columns ("7", "a") for old tuples; one ("7") for key-only old tuples.
MessageBuilder key_tuple(MessageBuilder b) { return b.int16(1).text_column("7"); }
MessageBuilder full_tuple(MessageBuilder b) { return b.int16(2).text_column("7").text_column("a"); }
MessageBuilder new_tuple(MessageBuilder b) { return b.int8('N').int16(2).text_column("7").null_column(); }

void expect_new_tuple(const TupleData& t) {
  ASSERT_EQ(t.columns.size(), 2U);
  EXPECT_EQ(t.columns[0].kind, ColumnKind::text);
  EXPECT_EQ(t.columns[0].bytes, "7");
  EXPECT_EQ(t.columns[1].kind, ColumnKind::null);
}

// ---- Insert 'I': [xid] Int32 relid, 'N', TupleData
const Bytes& kInsert = register_vector("insert", every_column_kind(MessageBuilder('I').int32(kRelid).int8('N')));
const Bytes& kInsertInStream = register_vector(
    "insert_in_stream", every_column_kind(MessageBuilder('I').int32(kXid).int32(kRelid2).int8('N')), kInStream);
const Bytes& kInsertNoColumns =
    register_vector("insert_no_columns", MessageBuilder('I').int32(kRelid).int8('N').int16(0));

TEST(DecodeInsert, ReadsEveryColumnKind) {
  const auto m = decode_to<InsertData>(kInsert);
  EXPECT_FALSE(m.xid.has_value());
  EXPECT_EQ(m.relid, kRelid);
  expect_every_column_kind(m.new_tuple, kInsert);
}

TEST(DecodeInsert, InStreamReadsXidFirst) {
  const auto m = decode_to<InsertData>(kInsertInStream, kInStream);
  EXPECT_EQ(m.xid, kXid);
  EXPECT_EQ(m.relid, kRelid2);
  expect_every_column_kind(m.new_tuple, kInsertInStream);
}

TEST(DecodeInsert, AcceptsAnEmptyTuple) {
  const auto m = decode_to<InsertData>(kInsertNoColumns);
  EXPECT_EQ(m.relid, kRelid);
  EXPECT_TRUE(m.new_tuple.columns.empty());
}

// ---- Update 'U': [xid] Int32 relid, optional ('K' | 'O') TupleData, 'N' TupleData
const Bytes& kUpdate = register_vector("update_no_old", new_tuple(MessageBuilder('U').int32(kRelid)));
const Bytes& kUpdateKey =
    register_vector("update_old_key", new_tuple(key_tuple(MessageBuilder('U').int32(kRelid).int8('K'))));
const Bytes& kUpdateOld =
    register_vector("update_old_row", new_tuple(full_tuple(MessageBuilder('U').int32(kRelid).int8('O'))));
const Bytes& kUpdateInStream = register_vector(
    "update_in_stream", new_tuple(key_tuple(MessageBuilder('U').int32(kSubXid).int32(kRelid).int8('K'))), kInStream);
const Bytes& kUpdateUnchangedToast = register_vector(
    "update_unchanged_toast",
    MessageBuilder('U').int32(kRelid).int8('N').int16(3).text_column("7").unchanged_column().binary_column(kBinary));

TEST(DecodeUpdate, WithoutOldTuple) {
  const auto m = decode_to<UpdateData>(kUpdate);
  EXPECT_FALSE(m.xid.has_value());
  EXPECT_EQ(m.relid, kRelid);
  EXPECT_EQ(m.old_kind, 0);
  EXPECT_FALSE(m.old_tuple.has_value());
  expect_new_tuple(m.new_tuple);
}

TEST(DecodeUpdate, WithOldKey) {
  const auto m = decode_to<UpdateData>(kUpdateKey);
  EXPECT_EQ(m.relid, kRelid);
  EXPECT_EQ(m.old_kind, 'K');
  ASSERT_TRUE(m.old_tuple.has_value());
  ASSERT_EQ(m.old_tuple->columns.size(), 1U);
  EXPECT_EQ(m.old_tuple->columns[0].kind, ColumnKind::text);
  EXPECT_EQ(m.old_tuple->columns[0].bytes, "7");
  expect_new_tuple(m.new_tuple);
}

TEST(DecodeUpdate, WithWholeOldRow) {
  const auto m = decode_to<UpdateData>(kUpdateOld);
  EXPECT_EQ(m.old_kind, 'O');
  ASSERT_TRUE(m.old_tuple.has_value());
  ASSERT_EQ(m.old_tuple->columns.size(), 2U);
  EXPECT_EQ(m.old_tuple->columns[0].bytes, "7");
  EXPECT_EQ(m.old_tuple->columns[1].kind, ColumnKind::text);
  EXPECT_EQ(m.old_tuple->columns[1].bytes, "a");
  expect_new_tuple(m.new_tuple);
}

TEST(DecodeUpdate, InStreamReadsXidFirst) {
  const auto m = decode_to<UpdateData>(kUpdateInStream, kInStream);
  EXPECT_EQ(m.xid, kSubXid);
  EXPECT_EQ(m.relid, kRelid);
  EXPECT_EQ(m.old_kind, 'K');
  ASSERT_TRUE(m.old_tuple.has_value());
  EXPECT_EQ(m.old_tuple->columns.size(), 1U);
  expect_new_tuple(m.new_tuple);
}

TEST(DecodeUpdate, UnchangedToastInNewTuple) {
  const auto m = decode_to<UpdateData>(kUpdateUnchangedToast);
  ASSERT_EQ(m.new_tuple.columns.size(), 3U);
  EXPECT_EQ(m.new_tuple.columns[0].bytes, "7");
  EXPECT_EQ(m.new_tuple.columns[1].kind, ColumnKind::unchanged_toast);
  EXPECT_EQ(m.new_tuple.columns[2].kind, ColumnKind::binary);
  EXPECT_EQ(m.new_tuple.columns[2].bytes, kBinary);
}

// ---- Delete 'D': [xid] Int32 relid, 'K' | 'O', TupleData
const Bytes& kDeleteKey = register_vector("delete_old_key", key_tuple(MessageBuilder('D').int32(kRelid).int8('K')));
const Bytes& kDeleteOld = register_vector("delete_old_row", full_tuple(MessageBuilder('D').int32(kRelid2).int8('O')));
const Bytes& kDeleteInStream =
    register_vector("delete_in_stream", key_tuple(MessageBuilder('D').int32(kXid).int32(kRelid).int8('K')), kInStream);

TEST(DecodeDelete, WithOldKey) {
  const auto m = decode_to<DeleteData>(kDeleteKey);
  EXPECT_FALSE(m.xid.has_value());
  EXPECT_EQ(m.relid, kRelid);
  EXPECT_EQ(m.old_kind, 'K');
  ASSERT_EQ(m.old_tuple.columns.size(), 1U);
  EXPECT_EQ(m.old_tuple.columns[0].bytes, "7");
}

TEST(DecodeDelete, WithWholeOldRow) {
  const auto m = decode_to<DeleteData>(kDeleteOld);
  EXPECT_EQ(m.relid, kRelid2);
  EXPECT_EQ(m.old_kind, 'O');
  ASSERT_EQ(m.old_tuple.columns.size(), 2U);
  EXPECT_EQ(m.old_tuple.columns[1].bytes, "a");
}

TEST(DecodeDelete, InStreamReadsXidFirst) {
  const auto m = decode_to<DeleteData>(kDeleteInStream, kInStream);
  EXPECT_EQ(m.xid, kXid);
  EXPECT_EQ(m.relid, kRelid);
  EXPECT_EQ(m.old_kind, 'K');
  EXPECT_EQ(m.old_tuple.columns.size(), 1U);
}

// ---- Truncate 'T': [xid] Int32 nrelids, Int8 options, nrelids × Int32 relid
const Bytes& kTruncate =
    register_vector("truncate", MessageBuilder('T').int32(3).int8(3).int32(kRelid).int32(kRelid2).int32(16400));
const Bytes& kTruncateInStream =
    register_vector("truncate_in_stream", MessageBuilder('T').int32(kXid).int32(1).int8(1).int32(kRelid), kInStream);

TEST(DecodeTruncate, ReadsOptionsAndRelids) {
  const auto m = decode_to<TruncateData>(kTruncate);
  EXPECT_FALSE(m.xid.has_value());
  EXPECT_EQ(m.options, 3);  // cascade | restart identity
  EXPECT_EQ(m.relids, (std::vector<Oid>{kRelid, kRelid2, 16400}));
}

TEST(DecodeTruncate, InStreamReadsXidFirst) {
  const auto m = decode_to<TruncateData>(kTruncateInStream, kInStream);
  EXPECT_EQ(m.xid, kXid);
  EXPECT_EQ(m.options, 1);
  EXPECT_EQ(m.relids, std::vector<Oid>{kRelid});
}

// ---- Message 'M': [xid] Int8 flags, Int64 lsn, String prefix, Int32 length, bytes
constexpr std::string_view kContent = "{\"a\":1}\0\xE2\x82\xAC"sv;  // NUL and UTF-8 inside
const Bytes& kMessageTransactional =
    register_vector("message_transactional", MessageBuilder('M')
                                                 .int8(1)
                                                 .int64(kLsnB)
                                                 .string("outbox")
                                                 .int32(static_cast<std::uint32_t>(kContent.size()))
                                                 .raw(kContent));
const Bytes& kMessageNonTransactional =
    register_vector("message_non_transactional", MessageBuilder('M').int8(0).int64(kLsnC).string("").int32(0));
const Bytes& kMessageInStream =
    register_vector("message_in_stream",
                    MessageBuilder('M').int32(kSubXid).int8(1).int64(kLsnA).string("p").int32(2).raw("hi"), kInStream);

TEST(DecodeMessage, Transactional) {
  const auto m = decode_to<MessageData>(kMessageTransactional);
  EXPECT_FALSE(m.xid.has_value());
  EXPECT_EQ(m.flags, 1);
  EXPECT_TRUE(m.transactional());
  EXPECT_EQ(m.lsn, Lsn{kLsnB});
  EXPECT_EQ(m.prefix, "outbox");
  EXPECT_EQ(m.content, kContent);
  EXPECT_TRUE(points_into(m.content, kMessageTransactional));
}

TEST(DecodeMessage, NonTransactionalWithEmptyPrefixAndContent) {
  const auto m = decode_to<MessageData>(kMessageNonTransactional);
  EXPECT_EQ(m.flags, 0);
  EXPECT_FALSE(m.transactional());
  EXPECT_EQ(m.lsn, Lsn{kLsnC});
  EXPECT_EQ(m.prefix, "");
  EXPECT_EQ(m.content, "");
}

TEST(DecodeMessage, InStreamReadsXidFirst) {
  const auto m = decode_to<MessageData>(kMessageInStream, kInStream);
  EXPECT_EQ(m.xid, kSubXid);
  EXPECT_TRUE(m.transactional());
  EXPECT_EQ(m.lsn, Lsn{kLsnA});
  EXPECT_EQ(m.prefix, "p");
  EXPECT_EQ(m.content, "hi");
}

// ---- Stream Start 'S': Int32 xid, Int8 first_segment
const Bytes& kStreamStartFirst = register_vector("stream_start_first", MessageBuilder('S').int32(kXid).int8(1));
const Bytes& kStreamStartLater = register_vector("stream_start_later", MessageBuilder('S').int32(kXid).int8(0));

TEST(DecodeStreamStart, ReadsXidAndFirstSegment) {
  const auto first = decode_to<StreamStartData>(kStreamStartFirst);
  EXPECT_EQ(first.xid, kXid);
  EXPECT_TRUE(first.first_segment);
  const auto later = decode_to<StreamStartData>(kStreamStartLater);
  EXPECT_EQ(later.xid, kXid);
  EXPECT_FALSE(later.first_segment);
}

// ---- Stream Stop 'E': no fields
const Bytes& kStreamStop = register_vector("stream_stop", MessageBuilder('E'));

TEST(DecodeStreamStop, IsJustTheTypeByte) { EXPECT_NO_THROW(decode_to<StreamStopData>(kStreamStop)); }

// ---- Stream Commit 'c': Int32 xid, Int8 flags, Int64 commit_lsn, Int64 end_lsn, Int64 commit_time
const Bytes& kStreamCommit = register_vector(
    "stream_commit", MessageBuilder('c').int32(kXid).int8(0).int64(kLsnA).int64(kLsnB).int64(bits(kTimeB)));

TEST(DecodeStreamCommit, ReadsEveryField) {
  const auto m = decode_to<StreamCommitData>(kStreamCommit);
  EXPECT_EQ(m.xid, kXid);
  EXPECT_EQ(m.flags, 0);
  EXPECT_EQ(m.commit_lsn, Lsn{kLsnA});
  EXPECT_EQ(m.end_lsn, Lsn{kLsnB});
  EXPECT_EQ(m.commit_time, kTimeB);
}

// ---- Stream Abort 'A': Int32 xid, Int32 subxid, (streaming = parallel: Int64 abort_lsn, Int64 abort_time)
const Bytes& kStreamAbort = register_vector("stream_abort", MessageBuilder('A').int32(kXid).int32(kSubXid));
const Bytes& kStreamAbortParallel =
    register_vector("stream_abort_parallel",
                    MessageBuilder('A').int32(kXid).int32(kSubXid).int64(kLsnC).int64(bits(kTimeA)), kParallel);

TEST(DecodeStreamAbort, WithoutAbortInfo) {
  const auto m = decode_to<StreamAbortData>(kStreamAbort);
  EXPECT_EQ(m.xid, kXid);
  EXPECT_EQ(m.subxid, kSubXid);
  EXPECT_FALSE(m.abort_lsn.has_value());
  EXPECT_FALSE(m.abort_time.has_value());
}

TEST(DecodeStreamAbort, ParallelStreamingCarriesAbortLsnAndTime) {
  const auto m = decode_to<StreamAbortData>(kStreamAbortParallel, kParallel);
  EXPECT_EQ(m.xid, kXid);
  EXPECT_EQ(m.subxid, kSubXid);
  EXPECT_EQ(m.abort_lsn, Lsn{kLsnC});
  EXPECT_EQ(m.abort_time, kTimeA);
}

// ---- Begin Prepare 'b': Int64 prepare_lsn, Int64 end_lsn, Int64 prepare_time, Int32 xid, String gid
const Bytes& kBeginPrepare = register_vector(
    "begin_prepare", MessageBuilder('b').int64(kLsnA).int64(kLsnB).int64(bits(kTimeA)).int32(kXid).string("gid-1"));

TEST(DecodeBeginPrepare, ReadsEveryField) {
  const auto m = decode_to<BeginPrepareData>(kBeginPrepare);
  EXPECT_EQ(m.prepare_lsn, Lsn{kLsnA});
  EXPECT_EQ(m.end_lsn, Lsn{kLsnB});
  EXPECT_EQ(m.prepare_time, kTimeA);
  EXPECT_EQ(m.xid, kXid);
  EXPECT_EQ(m.gid, "gid-1");
}

// ---- Prepare 'P' / Stream Prepare 'p': Int8 flags, Int64 prepare_lsn, Int64 end_lsn,
//      Int64 prepare_time, Int32 xid, String gid
MessageBuilder prepare_body(char type) {
  return MessageBuilder(type).int8(0).int64(kLsnB).int64(kLsnC).int64(bits(kTimeB)).int32(kXid).string("gid-\xC3\xA9");
}
const Bytes& kPrepare = register_vector("prepare", prepare_body('P'));
const Bytes& kStreamPrepare = register_vector("stream_prepare", prepare_body('p'));

void expect_prepare_body(const PrepareData& m) {
  EXPECT_EQ(m.flags, 0);
  EXPECT_EQ(m.prepare_lsn, Lsn{kLsnB});
  EXPECT_EQ(m.end_lsn, Lsn{kLsnC});
  EXPECT_EQ(m.prepare_time, kTimeB);
  EXPECT_EQ(m.xid, kXid);
  EXPECT_EQ(m.gid, "gid-\xC3\xA9");
}

TEST(DecodePrepare, ReadsEveryField) {
  const auto m = decode_to<PrepareData>(kPrepare);
  EXPECT_FALSE(m.streamed);
  expect_prepare_body(m);
}

TEST(DecodeStreamPrepare, SharesThePrepareLayout) {
  const auto m = decode_to<PrepareData>(kStreamPrepare);
  EXPECT_TRUE(m.streamed);
  expect_prepare_body(m);
}

// ---- Commit Prepared 'K': Int8 flags, Int64 commit_lsn, Int64 end_lsn, Int64 commit_time,
//      Int32 xid, String gid
const Bytes& kCommitPrepared = register_vector(
    "commit_prepared",
    MessageBuilder('K').int8(0).int64(kLsnA).int64(kLsnC).int64(bits(kTimeA)).int32(kXid).string("gid-1"));

TEST(DecodeCommitPrepared, ReadsEveryField) {
  const auto m = decode_to<CommitPreparedData>(kCommitPrepared);
  EXPECT_EQ(m.flags, 0);
  EXPECT_EQ(m.commit_lsn, Lsn{kLsnA});
  EXPECT_EQ(m.end_lsn, Lsn{kLsnC});
  EXPECT_EQ(m.commit_time, kTimeA);
  EXPECT_EQ(m.xid, kXid);
  EXPECT_EQ(m.gid, "gid-1");
}

// ---- Rollback Prepared 'r': Int8 flags, Int64 prepare_end_lsn, Int64 rollback_end_lsn,
//      Int64 prepare_time, Int64 rollback_time, Int32 xid, String gid
const Bytes& kRollbackPrepared = register_vector("rollback_prepared", MessageBuilder('r')
                                                                          .int8(0)
                                                                          .int64(kLsnB)
                                                                          .int64(kLsnC)
                                                                          .int64(bits(kTimeA))
                                                                          .int64(bits(kTimeB))
                                                                          .int32(kXid)
                                                                          .string(""));

TEST(DecodeRollbackPrepared, ReadsEveryField) {
  const auto m = decode_to<RollbackPreparedData>(kRollbackPrepared);
  EXPECT_EQ(m.flags, 0);
  EXPECT_EQ(m.prepare_end_lsn, Lsn{kLsnB});
  EXPECT_EQ(m.rollback_end_lsn, Lsn{kLsnC});
  EXPECT_EQ(m.prepare_time, kTimeA);
  EXPECT_EQ(m.rollback_time, kTimeB);
  EXPECT_EQ(m.xid, kXid);
  EXPECT_EQ(m.gid, "");
}

// ---- Options touch only the messages they belong to.
TEST(DecodeOptionsScope, InStreamAndParallelLeaveOtherKindsAlone) {
  // [xid] exists only for R/Y/I/U/D/T/M and abort info only for A: every other vector decodes
  // to the same message under every option combination.
  int checked = 0;
  for (const auto& v : registered_vectors()) {
    const char kind = static_cast<char>(v.bytes.at(0));
    if (std::string_view("RYIUDTMA").find(kind) != std::string_view::npos) continue;
    const auto baseline = decode(v.bytes, v.options);
    ASSERT_TRUE(baseline.ok()) << v.name;
    for (const bool in_stream : {false, true}) {
      for (const bool parallel : {false, true}) {
        const auto again = decode(v.bytes, DecodeOptions{in_stream, parallel});
        ASSERT_TRUE(again.ok()) << v.name << ": " << again.error().to_string();
        EXPECT_EQ(again.message().index(), baseline.message().index()) << v.name;
      }
    }
    ++checked;
  }
  EXPECT_GE(checked, 15);
}

TEST(DecodeOptionsScope, ChangesWithoutInStreamMisreadTheXid) {
  // The in-stream Insert decoded as a top-level one reads the xid as relid and then the first
  // relid byte (0x9A) where 'N' belongs.
  const auto result = decode(kInsertInStream);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().kind, 'I');
  EXPECT_EQ(result.error().offset, 5U);
  EXPECT_EQ(result.error().reason, "tuple_marker is 0x9a, expected 'N'");
}

TEST(DecodeOptionsScope, StreamAbortLayoutFollowsParallelOption) {
  const auto extra = decode(kStreamAbortParallel);
  ASSERT_FALSE(extra.ok());
  EXPECT_EQ(extra.error().offset, 9U);
  EXPECT_EQ(extra.error().reason, "16 trailing bytes after a complete Stream Abort message");

  const auto missing = decode(kStreamAbort, kParallel);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().offset, 9U);
  EXPECT_EQ(missing.error().reason, "truncated Int64 abort_lsn");
}

}  // namespace
}  // namespace pgoutbox::pgoutput::testing
