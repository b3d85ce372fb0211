// Messages captured from a real PostgreSQL 15.18 server (Debian 15.18-0+deb12u1), so the
// decoder is checked against what the server writes, not only against our reading of proto.c.
//
// How they were captured (a throw-away cluster, stopped and deleted afterwards):
//   initdb -E UTF8 --locale=C.UTF-8; wal_level=logical, max_prepared_transactions=5,
//   logical_decoding_work_mem=64kB (so a 3000-row transaction is streamed); listen on 127.0.0.1.
//   Each slot was created with pg_create_logical_replication_slot(name, 'pgoutput'[, false, true
//   for two-phase]) after its table and publication, then the SQL below ran, then
//     SELECT lsn, xid, encode(data, 'hex') FROM pg_logical_slot_peek_binary_changes(slot, NULL,
//       NULL, 'proto_version', …, 'publication_names', …, <options>)
//   The expected values below come from that session (the SQL, the xid and lsn columns of the
//   peek, the LSNs pg_logical_emit_message returned, the wall clock), not from the decoder.
// Capture date: 2026-11-29, 08:49–08:51 UTC.

#include <gtest/gtest.h>

#include <cstdint>
#include <string_view>

#include "message_builder.h"
#include "pgoutbox/pgoutput/decoder.h"
#include "test_vectors.h"

namespace pgoutbox::pgoutput::testing {
namespace {

using namespace std::string_view_literals;

Lsn lsn(std::string_view text) { return Lsn::parse(text).value(); }

// Commit and prepare times were taken during the capture session.
void expect_capture_day(PgTimestamp ts) {
  constexpr std::int64_t kDayStart = 1'795'910'400LL * 1'000'000;  // 2026-11-29 00:00:00 UTC
  constexpr std::int64_t kDayEnd = 1'795'996'800LL * 1'000'000;    // 2026-11-30 00:00:00 UTC
  EXPECT_GE(to_unix_micros(ts), kDayStart);
  EXPECT_LT(to_unix_micros(ts), kDayEnd);
}

// ---- Slot 's', proto_version '1', messages 'true':
//   CREATE TABLE outbox (id int PRIMARY KEY, topic text NOT NULL, payload text, note text);
//   ALTER TABLE outbox REPLICA IDENTITY FULL;  CREATE PUBLICATION p FOR TABLE outbox;
//   INSERT INTO outbox VALUES (1, 'orders', 'héllo €', NULL);            -- xid 727
//   INSERT INTO outbox VALUES (2, '', NULL, 'x');                         -- xid 728
//   UPDATE outbox SET note = 'y' WHERE id = 2;                            -- xid 729
//   DELETE FROM outbox WHERE id = 1;                                      -- xid 730
//   SELECT pg_logical_emit_message(true, 'prefix', 'content');   -- 0/15297E8, xid 731
//   SELECT pg_logical_emit_message(false, 'prefix', 'content');  -- 0/1529858
//   TRUNCATE outbox;                                                      -- xid 732
const Bytes& kBegin727 = register_vector("pg15_begin", from_hex("4200000000015295b800030465252224f8000002d7"));
const Bytes& kRelationOutbox = register_vector(
    "pg15_relation_outbox",
    from_hex("52000040007075626c6963006f7574626f78006600040169640000000017ffffffff01746f7069630000000019ffffffff01"
             "7061796c6f61640000000019ffffffff016e6f74650000000019ffffffff"));
const Bytes& kInsert727 = register_vector(
    "pg15_insert", from_hex("49000040004e000474000000013174000000066f7264657273740000000a68c3a96c6c6f20e282ac6e"));
const Bytes& kCommit727 =
    register_vector("pg15_commit", from_hex("430000000000015295b800000000015295e800030465252224f8"));
const Bytes& kUpdate729 = register_vector(
    "pg15_update_full",
    from_hex("55000040004f000474000000013274000000006e7400000001784e000474000000013274000000006e740000000179"));
const Bytes& kDelete730 = register_vector(
    "pg15_delete_full", from_hex("44000040004f000474000000013174000000066f7264657273740000000a68c3a96c6c6f20e282ac6e"));
const Bytes& kMessageTx =
    register_vector("pg15_message_transactional", from_hex("4d0100000000015297e87072656669780000000007636f6e74656e74"));
const Bytes& kMessageNonTx = register_vector("pg15_message_non_transactional",
                                             from_hex("4d0000000000015298587072656669780000000007636f6e74656e74"));
const Bytes& kTruncate732 = register_vector("pg15_truncate", from_hex("54000000010000004000"));

TEST(Pg15Capture, BeginRelationInsertCommit) {
  const auto begin = decode_to<BeginData>(kBegin727);
  EXPECT_EQ(begin.xid, 727U);
  expect_capture_day(begin.commit_time);

  const auto rel = decode_to<RelationData>(kRelationOutbox);
  EXPECT_FALSE(rel.xid.has_value());
  EXPECT_EQ(rel.nspname, "public");
  EXPECT_EQ(rel.relname, "outbox");
  EXPECT_EQ(rel.replident, 'f');  // REPLICA IDENTITY FULL: every column is flagged as key
  ASSERT_EQ(rel.columns.size(), 4U);
  const std::string_view names[] = {"id", "topic", "payload", "note"};
  const Oid types[] = {23, 25, 25, 25};  // int4, text, text, text
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(rel.columns[i].flags, 1) << i;
    EXPECT_EQ(rel.columns[i].name, names[i]);
    EXPECT_EQ(rel.columns[i].type_oid, types[i]);
    EXPECT_EQ(rel.columns[i].typmod, -1);
  }

  const auto insert = decode_to<InsertData>(kInsert727);
  EXPECT_EQ(insert.relid, rel.relid);
  ASSERT_EQ(insert.new_tuple.columns.size(), 4U);
  EXPECT_EQ(insert.new_tuple.columns[0].bytes, "1");
  EXPECT_EQ(insert.new_tuple.columns[1].bytes, "orders");
  EXPECT_EQ(insert.new_tuple.columns[2].kind, ColumnKind::text);
  EXPECT_EQ(insert.new_tuple.columns[2].bytes, "h\xC3\xA9llo \xE2\x82\xAC");
  EXPECT_EQ(insert.new_tuple.columns[3].kind, ColumnKind::null);

  const auto commit = decode_to<CommitData>(kCommit727);
  EXPECT_EQ(commit.flags, 0);
  EXPECT_EQ(commit.commit_lsn, begin.final_lsn);  // Begin announces the commit record's LSN
  EXPECT_EQ(commit.end_lsn, lsn("0/15295E8"));    // the peek's lsn column for the commit row
  EXPECT_EQ(commit.commit_time, begin.commit_time);
}

TEST(Pg15Capture, UpdateAndDeleteWithReplicaIdentityFull) {
  const auto update = decode_to<UpdateData>(kUpdate729);
  EXPECT_EQ(update.old_kind, 'O');
  ASSERT_TRUE(update.old_tuple.has_value());
  ASSERT_EQ(update.old_tuple->columns.size(), 4U);
  EXPECT_EQ(update.old_tuple->columns[0].bytes, "2");
  EXPECT_EQ(update.old_tuple->columns[1].kind, ColumnKind::text);
  EXPECT_EQ(update.old_tuple->columns[1].bytes, "");  // topic ''
  EXPECT_EQ(update.old_tuple->columns[2].kind, ColumnKind::null);
  EXPECT_EQ(update.old_tuple->columns[3].bytes, "x");
  ASSERT_EQ(update.new_tuple.columns.size(), 4U);
  EXPECT_EQ(update.new_tuple.columns[3].bytes, "y");

  const auto del = decode_to<DeleteData>(kDelete730);
  EXPECT_EQ(del.old_kind, 'O');
  ASSERT_EQ(del.old_tuple.columns.size(), 4U);
  EXPECT_EQ(del.old_tuple.columns[0].bytes, "1");
  EXPECT_EQ(del.old_tuple.columns[2].bytes, "h\xC3\xA9llo \xE2\x82\xAC");
  EXPECT_EQ(del.old_tuple.columns[3].kind, ColumnKind::null);
}

TEST(Pg15Capture, LogicalMessages) {
  const auto tx = decode_to<MessageData>(kMessageTx);
  EXPECT_TRUE(tx.transactional());
  EXPECT_EQ(tx.lsn, lsn("0/15297E8"));  // returned by pg_logical_emit_message
  EXPECT_EQ(tx.prefix, "prefix");
  EXPECT_EQ(tx.content, "content");

  const auto non_tx = decode_to<MessageData>(kMessageNonTx);
  EXPECT_FALSE(non_tx.transactional());
  EXPECT_EQ(non_tx.lsn, lsn("0/1529858"));
  EXPECT_EQ(non_tx.prefix, "prefix");
  EXPECT_EQ(non_tx.content, "content");
}

TEST(Pg15Capture, Truncate) {
  const auto rel = decode_to<RelationData>(kRelationOutbox);
  const auto t = decode_to<TruncateData>(kTruncate732);
  EXPECT_EQ(t.options, 0);  // neither CASCADE nor RESTART IDENTITY
  EXPECT_EQ(t.relids, std::vector<Oid>{rel.relid});
}

// ---- Slot 's2', proto_version '1', binary 'true':
//   CREATE TYPE mood AS ENUM ('sad', 'happy');
//   CREATE TABLE t2 (id int PRIMARY KEY, m mood, big text, b bytea);  big: STORAGE EXTERNAL
//   INSERT INTO t2 VALUES (1, 'happy', repeat('z', 3000), '\x00ff');
//   UPDATE t2 SET m = 'sad' WHERE id = 1;   -- big stays on disk: sent as 'u'
const Bytes& kTypeMood = register_vector("pg15_type", from_hex("590000400e7075626c6963006d6f6f6400"));
const Bytes& kRelationT2 = register_vector(
    "pg15_relation_t2", from_hex("52000040137075626c6963007432006400040169640000000017ffffffff006d000000400efffff"
                                 "fff006269670000000019ffffffff00620000000011ffffffff"));
const Bytes& kUpdateBinary =
    register_vector("pg15_update_binary_unchanged_toast",
                    from_hex("55000040134e0004620000000400000001620000000373616475620000000200ff"));

TEST(Pg15Capture, TypeAndBinaryColumnsWithUnchangedToast) {
  const auto type = decode_to<TypeData>(kTypeMood);
  EXPECT_EQ(type.nspname, "public");
  EXPECT_EQ(type.typname, "mood");

  const auto rel = decode_to<RelationData>(kRelationT2);
  EXPECT_EQ(rel.relname, "t2");
  EXPECT_EQ(rel.replident, 'd');
  ASSERT_EQ(rel.columns.size(), 4U);
  EXPECT_EQ(rel.columns[0].flags, 1);  // primary key
  EXPECT_EQ(rel.columns[1].flags, 0);
  EXPECT_EQ(rel.columns[1].name, "m");
  EXPECT_EQ(rel.columns[1].type_oid, type.oid);  // the Type message describes this column's type
  EXPECT_EQ(rel.columns[3].type_oid, 17U);       // bytea

  const auto update = decode_to<UpdateData>(kUpdateBinary);
  EXPECT_EQ(update.relid, rel.relid);
  EXPECT_FALSE(update.old_tuple.has_value());  // key unchanged, REPLICA IDENTITY DEFAULT
  ASSERT_EQ(update.new_tuple.columns.size(), 4U);
  EXPECT_EQ(update.new_tuple.columns[0].kind, ColumnKind::binary);
  EXPECT_EQ(update.new_tuple.columns[0].bytes, "\x00\x00\x00\x01"sv);  // int4send(1)
  EXPECT_EQ(update.new_tuple.columns[1].kind, ColumnKind::binary);
  EXPECT_EQ(update.new_tuple.columns[1].bytes, "sad");  // enum_send: the label
  EXPECT_EQ(update.new_tuple.columns[2].kind, ColumnKind::unchanged_toast);
  EXPECT_EQ(update.new_tuple.columns[3].bytes, "\x00\xff"sv);  // bytea_send: raw bytes
}

// ---- Slot 's3' (two-phase), proto_version '3', streaming 'on', two_phase 'on':
//   CREATE TABLE t3 (id int PRIMARY KEY);
//   BEGIN; INSERT INTO t3 SELECT generate_series(1, 3000); COMMIT;      -- xid 741, streamed
//   BEGIN; INSERT INTO t3 VALUES (-1); PREPARE TRANSACTION 'gid-1';     -- xid 742
//   COMMIT PREPARED 'gid-1';
//   BEGIN; INSERT INTO t3 VALUES (-2); PREPARE TRANSACTION 'gid-2';     -- xid 743
//   ROLLBACK PREPARED 'gid-2';
const Bytes& kStreamStartFirst = register_vector("pg15_stream_start_first", from_hex("53000002e501"));
const Bytes& kRelationInStream =
    register_vector("pg15_relation_in_stream",
                    from_hex("52000002e50000401d7075626c6963007433006400010169640000000017ffffffff"), kInStream);
const Bytes& kInsertInStream =
    register_vector("pg15_insert_in_stream", from_hex("49000002e50000401d4e0001740000000131"), kInStream);
const Bytes& kStreamStop = register_vector("pg15_stream_stop", from_hex("45"));
const Bytes& kStreamStartLater = register_vector("pg15_stream_start_later", from_hex("53000002e500"));
const Bytes& kStreamCommit =
    register_vector("pg15_stream_commit", from_hex("63000002e500000000000159cb58000000000159cb880003046525f5c4d1"));
const Bytes& kBeginPrepare = register_vector(
    "pg15_begin_prepare", from_hex("62000000000159cc08000000000159cd000003046525f5c792000002e66769642d3100"));
const Bytes& kPrepare = register_vector(
    "pg15_prepare", from_hex("5000000000000159cc08000000000159cd000003046525f5c792000002e66769642d3100"));
const Bytes& kCommitPrepared = register_vector(
    "pg15_commit_prepared", from_hex("4b00000000000159cd00000000000159cd380003046525f5c84b000002e66769642d3100"));
const Bytes& kRollbackPrepared = register_vector(
    "pg15_rollback_prepared",
    from_hex("7200000000000159ceb0000000000159cee80003046525f5c9590003046525f5ca00000002e76769642d3200"));

TEST(Pg15Capture, StreamedTransaction) {
  const auto start = decode_to<StreamStartData>(kStreamStartFirst);
  EXPECT_EQ(start.xid, 741U);
  EXPECT_TRUE(start.first_segment);

  const auto rel = decode_to<RelationData>(kRelationInStream, kInStream);
  EXPECT_EQ(rel.xid, 741U);
  EXPECT_EQ(rel.relname, "t3");
  ASSERT_EQ(rel.columns.size(), 1U);
  EXPECT_EQ(rel.columns[0].name, "id");

  const auto insert = decode_to<InsertData>(kInsertInStream, kInStream);
  EXPECT_EQ(insert.xid, 741U);
  EXPECT_EQ(insert.relid, rel.relid);
  ASSERT_EQ(insert.new_tuple.columns.size(), 1U);
  EXPECT_EQ(insert.new_tuple.columns[0].bytes, "1");  // generate_series starts at 1

  EXPECT_NO_THROW(decode_to<StreamStopData>(kStreamStop));

  const auto later = decode_to<StreamStartData>(kStreamStartLater);
  EXPECT_EQ(later.xid, 741U);
  EXPECT_FALSE(later.first_segment);

  const auto commit = decode_to<StreamCommitData>(kStreamCommit);
  EXPECT_EQ(commit.xid, 741U);
  EXPECT_EQ(commit.flags, 0);
  EXPECT_LT(commit.commit_lsn, commit.end_lsn);
  EXPECT_EQ(commit.end_lsn, lsn("0/159CB88"));  // the peek's lsn column
  expect_capture_day(commit.commit_time);
}

TEST(Pg15Capture, TwoPhaseCommitAndRollback) {
  const auto begin = decode_to<BeginPrepareData>(kBeginPrepare);
  EXPECT_EQ(begin.xid, 742U);
  EXPECT_EQ(begin.gid, "gid-1");
  EXPECT_EQ(begin.end_lsn, lsn("0/159CD00"));  // the lsn column of the Prepare row

  const auto prepare = decode_to<PrepareData>(kPrepare);
  EXPECT_FALSE(prepare.streamed);
  EXPECT_EQ(prepare.xid, 742U);
  EXPECT_EQ(prepare.gid, "gid-1");
  EXPECT_EQ(prepare.prepare_lsn, begin.prepare_lsn);
  EXPECT_EQ(prepare.end_lsn, begin.end_lsn);
  EXPECT_EQ(prepare.prepare_time, begin.prepare_time);
  expect_capture_day(prepare.prepare_time);

  const auto commit = decode_to<CommitPreparedData>(kCommitPrepared);
  EXPECT_EQ(commit.xid, 742U);
  EXPECT_EQ(commit.gid, "gid-1");
  EXPECT_EQ(commit.commit_lsn, prepare.end_lsn);  // COMMIT PREPARED directly follows the prepare
  EXPECT_EQ(commit.end_lsn, lsn("0/159CD38"));
  EXPECT_GT(commit.commit_time, prepare.prepare_time);

  const auto rollback = decode_to<RollbackPreparedData>(kRollbackPrepared);
  EXPECT_EQ(rollback.xid, 743U);
  EXPECT_EQ(rollback.gid, "gid-2");
  EXPECT_EQ(rollback.prepare_end_lsn, lsn("0/159CEB0"));  // lsn column of gid-2's Prepare row
  EXPECT_EQ(rollback.rollback_end_lsn, lsn("0/159CEE8"));
  EXPECT_GT(rollback.rollback_time, rollback.prepare_time);
  expect_capture_day(rollback.rollback_time);
}

// ---- Slot 's4' (two-phase), proto_version '3', streaming 'on', two_phase 'on', messages 'true':
//   BEGIN; INSERT INTO t4 SELECT generate_series(1, 3000); ...; ROLLBACK;             -- xid 746
//   BEGIN; INSERT INTO t4 SELECT generate_series(1, 3000); SAVEPOINT a;
//     INSERT INTO t4 SELECT generate_series(3001, 6000); ROLLBACK TO a;               -- subxact 748
//     PREPARE TRANSACTION 'gid-3';                                                    -- xid 747
const Bytes& kStreamAbortTop = register_vector("pg15_stream_abort_top", from_hex("41000002ea000002ea"));
const Bytes& kStreamAbortSub = register_vector("pg15_stream_abort_subxact", from_hex("41000002eb000002ec"));
const Bytes& kStreamPrepare = register_vector(
    "pg15_stream_prepare", from_hex("700000000000016c04d800000000016c05d000030465266f66ea000002eb6769642d3300"));

TEST(Pg15Capture, StreamAbortAndStreamPrepare) {
  const auto top = decode_to<StreamAbortData>(kStreamAbortTop);
  EXPECT_EQ(top.xid, 746U);
  EXPECT_EQ(top.subxid, 746U);  // the whole transaction
  EXPECT_FALSE(top.abort_lsn.has_value());

  const auto sub = decode_to<StreamAbortData>(kStreamAbortSub);
  EXPECT_EQ(sub.xid, 747U);
  EXPECT_EQ(sub.subxid, 748U);  // only the rolled-back savepoint

  const auto prepare = decode_to<PrepareData>(kStreamPrepare);
  EXPECT_TRUE(prepare.streamed);
  EXPECT_EQ(prepare.xid, 747U);
  EXPECT_EQ(prepare.gid, "gid-3");
  EXPECT_EQ(prepare.end_lsn, lsn("0/16C05D0"));
  expect_capture_day(prepare.prepare_time);
}

}  // namespace
}  // namespace pgoutbox::pgoutput::testing
