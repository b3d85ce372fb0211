// What pgoutbox uses of each major, decided from PQserverVersion alone (docs/pgoutput.md).
#include "pgoutbox/replication/server_features.h"

#include <gtest/gtest.h>

#include "pgoutbox/replication/connection.h"

namespace pgoutbox::replication {
namespace {

TEST(ServerFeaturesTest, EachMajorGetsItsProtocolAndSlotSyntax) {
  const auto v14 = features_of(140023);
  EXPECT_EQ(v14.proto_version, 2);
  EXPECT_TRUE(v14.messages);
  EXPECT_FALSE(v14.slot_options_list) << "14 only knows CREATE_REPLICATION_SLOT … NOEXPORT_SNAPSHOT";
  EXPECT_TRUE(v14.slot_two_phase);
  EXPECT_FALSE(v14.two_phase);
  EXPECT_FALSE(v14.failover_slots);

  const auto v15 = features_of(150018);
  EXPECT_EQ(v15.proto_version, 3);
  EXPECT_TRUE(v15.slot_options_list);
  EXPECT_TRUE(v15.two_phase);
  EXPECT_FALSE(v15.standby_decoding);

  const auto v16 = features_of(160014);
  EXPECT_EQ(v16.proto_version, 4);
  EXPECT_TRUE(v16.standby_decoding);
  EXPECT_TRUE(v16.slot_conflicting);
  EXPECT_FALSE(v16.slot_failover);

  for (const int version : {170010, 180004}) {
    const auto f = features_of(version);
    EXPECT_EQ(f.proto_version, 4);
    EXPECT_TRUE(f.failover_slots);
    EXPECT_TRUE(f.slot_failover);
    // publish_generated_columns and idle_replication_slot_timeout arrive with 18.
    EXPECT_EQ(f.publish_generated_columns, version >= 180000);
    EXPECT_EQ(f.idle_slot_timeout, version >= 180000);
  }
}

TEST(ServerFeaturesTest, DescribeNamesVersionProtocolAndFailover) {
  const auto text = features_of(170010).describe();
  EXPECT_NE(text.find("PostgreSQL 17.10"), std::string::npos) << text;
  EXPECT_NE(text.find("proto_version 4"), std::string::npos) << text;
  EXPECT_NE(text.find("failover slots yes"), std::string::npos) << text;
  EXPECT_EQ(version_text(90624), "9.6.24");
}

TEST(ServerFeaturesTest, ThirteenAndOlderAreRefusedWithFeatureNotSupported) {
  EXPECT_NO_THROW(require_supported_server(140000));
  try {
    require_supported_server(130023);
    FAIL() << "13 accepted";
  } catch (const PgError& e) {
    EXPECT_EQ(e.sqlstate(), "0A000");
    EXPECT_NE(std::string(e.what()).find("PostgreSQL 13.23 is not supported"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pgoutbox::replication
