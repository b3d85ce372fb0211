#include "db_failure.h"

#include <gtest/gtest.h>

namespace shop {
namespace {

DbFailure of(const char* sqlstate, bool connection_lost = false) {
  return classify(PgError("x", sqlstate, connection_lost));
}

TEST(DbFailure, WhatCanSucceedLaterIsTransient) {
  EXPECT_EQ(of("", true), DbFailure::transient);       // connection gone, no server answer
  EXPECT_EQ(of("08006"), DbFailure::transient);        // connection failure
  EXPECT_EQ(of("40001"), DbFailure::transient);        // serialization failure
  EXPECT_EQ(of("40P01"), DbFailure::transient);        // deadlock detected
  EXPECT_EQ(of("57P01"), DbFailure::transient);        // admin shutdown (server restarting)
  EXPECT_EQ(of("57P03"), DbFailure::transient);        // cannot connect now (starting up)
  EXPECT_EQ(of("53300"), DbFailure::transient);        // too many connections
  EXPECT_EQ(of("55P03"), DbFailure::transient);        // lock not available
  EXPECT_EQ(of("42P01", true), DbFailure::transient);  // whatever it said, the connection is gone
}

TEST(DbFailure, WhatRetryingCannotFixIsFatal) {
  EXPECT_EQ(of("42P01"), DbFailure::fatal);  // undefined table
  EXPECT_EQ(of("42501"), DbFailure::fatal);  // insufficient privilege
  EXPECT_EQ(of("23502"), DbFailure::fatal);  // not null violation: a bug
  EXPECT_EQ(of(""), DbFailure::fatal);
}

}  // namespace
}  // namespace shop
