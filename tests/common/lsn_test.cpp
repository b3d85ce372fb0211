#include "pgoutbox/lsn.h"

#include <gtest/gtest.h>

namespace pgoutbox {
namespace {

TEST(Lsn, PrintsLikePostgres) {
  EXPECT_EQ(Lsn{0}.to_string(), "0/0");
  EXPECT_EQ(Lsn{0x16B374D848ULL}.to_string(), "16/B374D848");
  EXPECT_EQ(Lsn{0xFFFFFFFFFFFFFFFFULL}.to_string(), "FFFFFFFF/FFFFFFFF");
}

TEST(Lsn, ParsesWhatPostgresPrints) {
  EXPECT_EQ(Lsn::parse("16/B374D848"), Lsn{0x16B374D848ULL});
  EXPECT_EQ(Lsn::parse("0/0"), Lsn{0});
  EXPECT_EQ(Lsn::parse("0/1a"), Lsn{0x1a});
  const Lsn round{0x123456789ABCDEFULL};
  EXPECT_EQ(Lsn::parse(round.to_string()), round);
}

TEST(Lsn, RejectsMalformedText) {
  for (const char* bad : {"", "/", "1/", "/1", "12", "1/2/3", "G/0", "123456789/0", "0/ 1", "-1/0"}) {
    EXPECT_FALSE(Lsn::parse(bad).has_value()) << bad;
  }
}

TEST(Lsn, OrdersByPosition) {
  EXPECT_LT(Lsn{1}, Lsn{2});
  EXPECT_LT(*Lsn::parse("0/FFFFFFFF"), *Lsn::parse("1/0"));
}

}  // namespace
}  // namespace pgoutbox
