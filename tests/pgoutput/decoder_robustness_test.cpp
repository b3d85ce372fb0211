// Hostile and broken input: every registered vector cut at every length and extended by a
// byte, plus hand-corrupted vectors with the exact error offset and reason. Each input is
// copied into its own exactly-sized heap buffer so that, under the asan preset, a read one byte
// past the end is reported rather than landing in the rest of the original vector.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "message_builder.h"
#include "pgoutbox/pgoutput/decoder.h"
#include "test_vectors.h"

namespace pgoutbox::pgoutput::testing {
namespace {

// Every string_view in a decoded message must lie inside the input.
struct ViewsInside {
  const Bytes& bytes;
  bool ok = true;

  // NULL and unchanged columns carry a default (null) view; every other view points inside.
  void check(std::string_view v) { ok = ok && ((v.data() == nullptr && v.empty()) || points_into(v, bytes)); }
  void check(const TupleData& t) {
    for (const auto& c : t.columns) check(c.bytes);
  }
  void operator()(const OriginData& m) { check(m.name); }
  void operator()(const RelationData& m) {
    check(m.nspname);
    check(m.relname);
    for (const auto& c : m.columns) check(c.name);
  }
  void operator()(const TypeData& m) {
    check(m.nspname);
    check(m.typname);
  }
  void operator()(const InsertData& m) { check(m.new_tuple); }
  void operator()(const UpdateData& m) {
    if (m.old_tuple) check(*m.old_tuple);
    check(m.new_tuple);
  }
  void operator()(const DeleteData& m) { check(m.old_tuple); }
  void operator()(const MessageData& m) {
    check(m.prefix);
    check(m.content);
  }
  void operator()(const BeginPrepareData& m) { check(m.gid); }
  void operator()(const PrepareData& m) { check(m.gid); }
  void operator()(const CommitPreparedData& m) { check(m.gid); }
  void operator()(const RollbackPreparedData& m) { check(m.gid); }
  template <typename T>
  void operator()(const T&) {}  // no views in the fixed-size messages
};

TEST(DecoderRobustness, SweepCoversEveryMessageKind) {
  // Guards the sweeps below against walking an empty or partial registry.
  std::string kinds;
  for (const auto& v : registered_vectors()) {
    const char kind = static_cast<char>(v.bytes.at(0));
    if (kinds.find(kind) == std::string::npos) kinds += kind;
  }
  for (const char kind : std::string_view("BCORYIUDTMSEcAbPpKr")) {
    EXPECT_NE(kinds.find(kind), std::string::npos) << "no vector of kind '" << kind << "'";
  }
}

TEST(DecoderRobustness, EveryVectorDecodesWithViewsIntoItsInput) {
  for (const auto& v : registered_vectors()) {
    const Bytes copy = v.bytes;
    const auto result = decode(copy, v.options);
    ASSERT_TRUE(result.ok()) << v.name << ": " << result.error().to_string();
    ViewsInside inside{copy};
    std::visit(inside, result.message());
    EXPECT_TRUE(inside.ok) << v.name;
  }
}

TEST(DecoderRobustness, EveryTruncationIsAnError) {
  std::size_t prefixes = 0;
  for (const auto& v : registered_vectors()) {
    for (std::size_t length = 0; length < v.bytes.size(); ++length) {
      const Bytes prefix(v.bytes.begin(), v.bytes.begin() + static_cast<std::ptrdiff_t>(length));
      const auto result = decode(prefix, v.options);
      ASSERT_FALSE(result.ok()) << v.name << " cut to " << length << " bytes decoded";
      const auto& error = result.error();
      if (length == 0) {
        EXPECT_EQ(error.kind, 0);
        EXPECT_EQ(error.reason, "empty message");
      } else {
        EXPECT_EQ(error.kind, static_cast<char>(v.bytes[0])) << v.name;
        // The failing field starts inside the prefix (or right at its end).
        EXPECT_LE(error.offset, length) << v.name << " cut to " << length << ": " << error.to_string();
        EXPECT_EQ(error.reason.find("trailing"), std::string::npos) << v.name << ": " << error.to_string();
      }
      ++prefixes;
    }
  }
  EXPECT_GT(prefixes, 1000U);
}

TEST(DecoderRobustness, ATrailingByteIsAnError) {
  for (const auto& v : registered_vectors()) {
    Bytes longer = v.bytes;
    longer.push_back(std::byte{0});
    const auto result = decode(longer, v.options);
    ASSERT_FALSE(result.ok()) << v.name;
    EXPECT_EQ(result.error().kind, static_cast<char>(v.bytes[0])) << v.name;
    EXPECT_EQ(result.error().offset, v.bytes.size()) << v.name;
    EXPECT_EQ(result.error().reason,
              std::string("1 trailing byte after a complete ") + kind_name(static_cast<char>(v.bytes[0])) + " message")
        << v.name;
  }
}

DecodeError decode_error(const Bytes& bytes, const DecodeOptions& options = {}) {
  const Bytes copy = bytes;
  const auto result = decode(copy, options);
  if (result.ok()) throw std::runtime_error("expected a decode error");
  return result.error();
}

TEST(DecoderCorruption, EmptyInput) {
  const auto e = decode_error({});
  EXPECT_EQ(e.kind, 0);
  EXPECT_EQ(e.offset, 0U);
  EXPECT_EQ(e.reason, "empty message");
}

TEST(DecoderCorruption, UnknownMessageType) {
  for (const char type : {'Z', 'x', '\0', '\xff'}) {
    const auto e = decode_error(MessageBuilder(type).int64(1));
    EXPECT_EQ(e.kind, type);
    EXPECT_EQ(e.offset, 0U);
    EXPECT_EQ(e.reason, "unknown message type");
  }
}

TEST(DecoderCorruption, NegativeColumnLength) {
  // I(0) relid(1..4) 'N'(5) ncols(6..7) 't'(8) length(9..12)
  const auto e = decode_error(MessageBuilder('I').int32(1).int8('N').int16(1).int8('t').int32(0xFFFFFFFFU).raw("abc"));
  EXPECT_EQ(e.kind, 'I');
  EXPECT_EQ(e.offset, 9U);
  EXPECT_EQ(e.reason, "negative Int32 column_length[0] = -1");
}

TEST(DecoderCorruption, ColumnLengthBeyondTheMessage) {
  // Second column: 't'(14) length(15..18) claims 0x7fffffff bytes with 2 left.
  const auto e = decode_error(
      MessageBuilder('I').int32(1).int8('N').int16(2).text_column("a").int8('b').int32(0x7FFFFFFFU).raw("xy"));
  EXPECT_EQ(e.offset, 15U);
  EXPECT_EQ(e.reason, "Int32 column_length[1] = 2147483647 needs at least 2147483647 bytes, 2 left");
}

TEST(DecoderCorruption, HugeTupleColumnCount) {
  // ncols(6..7) = 65535 with 3 bytes left: refused before anything is reserved.
  const auto e =
      decode_error(MessageBuilder('I').int32(1).int8('N').int16(0xFFFF).null_column().null_column().null_column());
  EXPECT_EQ(e.offset, 6U);
  EXPECT_EQ(e.reason, "Int16 ncols = 65535 needs at least 65535 bytes, 3 left");
}

TEST(DecoderCorruption, HugeRelationColumnCount) {
  // R(0) relid(1..4) "s\0"(5..6) "t\0"(7..8) replident(9) ncols(10..11); one column is ≥ 10 bytes.
  const auto e = decode_error(
      MessageBuilder('R').int32(1).string("s").string("t").int8('d').int16(2).relation_column(0, "a", 23, -1));
  EXPECT_EQ(e.offset, 10U);
  EXPECT_EQ(e.reason, "Int16 ncols = 2 needs at least 20 bytes, 11 left");
}

TEST(DecoderCorruption, TruncateRelationCount) {
  const auto huge = decode_error(MessageBuilder('T').int32(0x7FFFFFFFU).int8(0).int32(1));
  EXPECT_EQ(huge.offset, 1U);
  EXPECT_EQ(huge.reason, "Int32 nrelids = 2147483647 needs at least 8589934588 bytes, 4 left");
  const auto negative = decode_error(MessageBuilder('T').int32(0x80000000U).int8(0));
  EXPECT_EQ(negative.offset, 1U);
  EXPECT_EQ(negative.reason, "negative Int32 nrelids = -2147483648");
}

TEST(DecoderCorruption, NegativeMessageContentLength) {
  // M(0) flags(1) lsn(2..9) "p\0"(10..11) length(12..15)
  const auto e = decode_error(MessageBuilder('M').int8(1).int64(1).string("p").int32(0xFFFFFFFEU));
  EXPECT_EQ(e.offset, 12U);
  EXPECT_EQ(e.reason, "negative Int32 content_length = -2");
}

TEST(DecoderCorruption, MalformedMessages) {
  // M(0) flags(1) lsn(2..9) prefix(10..) length content
  EXPECT_EQ(decode_error(MessageBuilder('M')).reason, "truncated Int8 flags");
  const auto lsn = decode_error(MessageBuilder('M').int8(1).int32(7));
  EXPECT_EQ(lsn.offset, 2U);
  EXPECT_EQ(lsn.reason, "truncated Int64 lsn");
  const auto prefix = decode_error(MessageBuilder('M').int8(1).int64(1).raw("outbox"));
  EXPECT_EQ(prefix.offset, 10U);
  EXPECT_EQ(prefix.reason, "unterminated String prefix (no NUL before end of message)");
  const auto no_length = decode_error(MessageBuilder('M').int8(1).int64(1).string("outbox").int8(0));
  EXPECT_EQ(no_length.offset, 17U);
  EXPECT_EQ(no_length.reason, "truncated Int32 content_length");
  const auto short_content = decode_error(MessageBuilder('M').int8(1).int64(1).string("p").int32(10).raw("{}"));
  EXPECT_EQ(short_content.offset, 12U);
  EXPECT_EQ(short_content.reason, "Int32 content_length = 10 needs at least 10 bytes, 2 left");
  const auto trailing = decode_error(MessageBuilder('M').int8(1).int64(1).string("p").int32(2).raw("{}x"));
  EXPECT_EQ(trailing.reason, "1 trailing byte after a complete Message message");
  // Outside a stream block the xid is not expected: a streamed layout read as a plain one fails.
  const auto streamed = decode_error(MessageBuilder('M').int32(7).int8(1).int64(1).string("p").int32(0));
  EXPECT_EQ(streamed.kind, 'M');
}

TEST(DecoderCorruption, UnknownColumnKind) {
  // I(0) relid(1..4) 'N'(5) ncols(6..7) 't' len "a" (8..13) 'x'(14)
  const auto e = decode_error(MessageBuilder('I').int32(1).int8('N').int16(2).text_column("a").int8('x'));
  EXPECT_EQ(e.offset, 14U);
  EXPECT_EQ(e.reason, "column_kind[1] is 'x', expected 'n', 'u', 't' or 'b'");
}

TEST(DecoderCorruption, UnknownOldTupleMarker) {
  const auto update = decode_error(MessageBuilder('U').int32(1).int8('X').int16(0));
  EXPECT_EQ(update.offset, 5U);
  EXPECT_EQ(update.reason, "tuple_marker is 'X', expected 'K', 'O' or 'N'");

  const auto del = decode_error(MessageBuilder('D').int32(1).int8('N').int16(0));
  EXPECT_EQ(del.offset, 5U);
  EXPECT_EQ(del.reason, "tuple_marker is 'N', expected 'K' or 'O'");

  const auto insert = decode_error(MessageBuilder('I').int32(1).int8('K').int16(0));
  EXPECT_EQ(insert.offset, 5U);
  EXPECT_EQ(insert.reason, "tuple_marker is 'K', expected 'N'");
}

TEST(DecoderCorruption, UpdateOldTupleNotFollowedByNewTuple) {
  // U(0) relid(1..4) 'K'(5) ncols(6..7)=0, then 'O'(8) where 'N' belongs.
  const auto e = decode_error(MessageBuilder('U').int32(1).int8('K').int16(0).int8('O').int16(0));
  EXPECT_EQ(e.offset, 8U);
  EXPECT_EQ(e.reason, "new_tuple_marker is 'O', expected 'N'");
}

TEST(DecoderCorruption, StringWithoutNul) {
  const auto e = decode_error(MessageBuilder('O').int64(1).raw("abc"));
  EXPECT_EQ(e.offset, 9U);
  EXPECT_EQ(e.reason, "unterminated String name (no NUL before end of message)");
}

TEST(DecodeError, FormatsKindNameOffsetAndReason) {
  // 'C' flags and 7 of commit_lsn's 8 bytes.
  const Bytes cut = MessageBuilder('C').int8(0).raw("\x01\x02\x03\x04\x05\x06\x07");
  const auto e = decode_error(cut);
  EXPECT_EQ(e.offset, 2U);
  EXPECT_EQ(e.to_string(), "pgoutput 'C' (Commit) at offset 2: truncated Int64 commit_lsn");

  EXPECT_EQ(decode_error(MessageBuilder('\xff')).to_string(),
            "pgoutput 0xff (unknown) at offset 0: unknown message type");
  EXPECT_EQ(decode_error({}).to_string(), "pgoutput 0x00 (unknown) at offset 0: empty message");
}

TEST(KindName, NamesEveryMessageKind) {
  EXPECT_STREQ(kind_name('B'), "Begin");
  EXPECT_STREQ(kind_name('C'), "Commit");
  EXPECT_STREQ(kind_name('O'), "Origin");
  EXPECT_STREQ(kind_name('R'), "Relation");
  EXPECT_STREQ(kind_name('Y'), "Type");
  EXPECT_STREQ(kind_name('I'), "Insert");
  EXPECT_STREQ(kind_name('U'), "Update");
  EXPECT_STREQ(kind_name('D'), "Delete");
  EXPECT_STREQ(kind_name('T'), "Truncate");
  EXPECT_STREQ(kind_name('M'), "Message");
  EXPECT_STREQ(kind_name('S'), "Stream Start");
  EXPECT_STREQ(kind_name('E'), "Stream Stop");
  EXPECT_STREQ(kind_name('c'), "Stream Commit");
  EXPECT_STREQ(kind_name('A'), "Stream Abort");
  EXPECT_STREQ(kind_name('b'), "Begin Prepare");
  EXPECT_STREQ(kind_name('P'), "Prepare");
  EXPECT_STREQ(kind_name('p'), "Stream Prepare");
  EXPECT_STREQ(kind_name('K'), "Commit Prepared");
  EXPECT_STREQ(kind_name('r'), "Rollback Prepared");
  EXPECT_STREQ(kind_name('Z'), "unknown");
  EXPECT_STREQ(kind_name('\0'), "unknown");
}

}  // namespace
}  // namespace pgoutbox::pgoutput::testing
