#include "pgoutbox/replication/copy_protocol.h"

#include <gtest/gtest.h>

#include <vector>

namespace pgoutbox::replication {
namespace {

std::vector<std::byte> bytes(std::initializer_list<int> values) {
  std::vector<std::byte> out;
  for (const int v : values) out.push_back(static_cast<std::byte>(v));
  return out;
}

void append_u64(std::vector<std::byte>& out, std::uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<std::byte>((v >> shift) & 0xFF));
}

TEST(CopyProtocol, ParsesXLogDataHeaderAndPayload) {
  auto msg = bytes({'w'});
  append_u64(msg, 0x0000000100000010ULL);
  append_u64(msg, 0x0000000100000020ULL);
  append_u64(msg, 777);
  msg.push_back(std::byte{'B'});
  msg.push_back(std::byte{0x01});
  const auto parsed = parse_copy_message(msg);
  ASSERT_TRUE(parsed);
  const auto& data = std::get<XLogData>(*parsed);
  EXPECT_EQ(data.start, Lsn{0x0000000100000010ULL});
  EXPECT_EQ(data.wal_end, Lsn{0x0000000100000020ULL});
  EXPECT_EQ(data.send_time, 777);
  ASSERT_EQ(data.payload.size(), 2U);
  EXPECT_EQ(data.payload[0], std::byte{'B'});
}

TEST(CopyProtocol, ParsesKeepalive) {
  auto msg = bytes({'k'});
  append_u64(msg, 0xABCDEFULL);
  append_u64(msg, 5);
  msg.push_back(std::byte{1});
  const auto parsed = parse_copy_message(msg);
  ASSERT_TRUE(parsed);
  const auto& k = std::get<Keepalive>(*parsed);
  EXPECT_EQ(k.wal_end, Lsn{0xABCDEFULL});
  EXPECT_EQ(k.send_time, 5);
  EXPECT_TRUE(k.reply_requested);
}

TEST(CopyProtocol, ShortHeadersAreRejectedAtEveryLength) {
  auto w = bytes({'w'});
  for (int i = 0; i < 24; ++i) w.push_back(std::byte{0});
  for (std::size_t len = 0; len < w.size(); ++len) {
    EXPECT_FALSE(parse_copy_message(std::span(w).first(len))) << len;
  }
  EXPECT_TRUE(parse_copy_message(w));  // an empty payload is still a well-formed header
  auto k = bytes({'k'});
  for (int i = 0; i < 17; ++i) k.push_back(std::byte{0});
  for (std::size_t len = 1; len < k.size(); ++len) {
    EXPECT_FALSE(parse_copy_message(std::span(k).first(len))) << len;
  }
}

TEST(CopyProtocol, UnknownTypesAreReportedNotGuessed) {
  const auto msg = bytes({'z', 1, 2});
  const auto parsed = parse_copy_message(msg);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(std::get<UnknownCopyMessage>(*parsed).type, 'z');
}

TEST(CopyProtocol, BuildsStandbyStatusUpdate) {
  const auto t = std::chrono::system_clock::time_point(std::chrono::seconds(946'684'800 + 10));
  const auto msg = build_status_update(Lsn{0x1122334455667788ULL}, Lsn{0x10}, Lsn{0x20}, t, true);
  ASSERT_EQ(msg.size(), 34U);
  EXPECT_EQ(msg[0], std::byte{'r'});
  EXPECT_EQ(msg[1], std::byte{0x11});
  EXPECT_EQ(msg[8], std::byte{0x88});
  EXPECT_EQ(msg[16], std::byte{0x10});
  EXPECT_EQ(msg[24], std::byte{0x20});
  // 10 s after the Postgres epoch = 10,000,000 µs = 0x989680
  EXPECT_EQ(msg[30], std::byte{0x98});
  EXPECT_EQ(msg[31], std::byte{0x96});
  EXPECT_EQ(msg[32], std::byte{0x80});
  EXPECT_EQ(msg[33], std::byte{1});
  EXPECT_EQ(to_pg_timestamp(t), 10'000'000);
}

}  // namespace
}  // namespace pgoutbox::replication
