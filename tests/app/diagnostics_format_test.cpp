// What `check` and `status --json` print, without services: finding lines, the summary, and a
// status object that a real JSON parser reads back field for field, awkward strings included.
#include <gtest/gtest.h>
#include <simdjson.h>

#include "pgoutbox/diagnostics/finding.h"
#include "pgoutbox/diagnostics/slot_status.h"

namespace pgoutbox::diagnostics {
namespace {

TEST(FindingFormat, OneLinePerFindingWithTheFixAfterTheMessage) {
  EXPECT_EQ(format_line(Finding::ok("wal_level", "logical")), "ok    wal_level: logical");
  EXPECT_EQ(format_line(Finding::blocking("wal_level", "is replica.", "set it.")),
            "FAIL  wal_level: is replica. Fix: set it.");
  EXPECT_EQ(format_line(Finding::warning("slot s", "is active.", "stop it.")),
            "WARN  slot s: is active. Fix: stop it.");
}

TEST(FindingFormat, OnlyBlockingFindingsBlock) {
  std::vector<Finding> findings = {Finding::ok("a", "x"), Finding::warning("b", "y", "z")};
  EXPECT_FALSE(any_blocking(findings));
  EXPECT_EQ(summary(findings), "1 ok, 1 warning, 0 blocking");
  findings.push_back(Finding::blocking("c", "w", "v"));
  EXPECT_TRUE(any_blocking(findings));
  EXPECT_EQ(summary(findings), "1 ok, 1 warning, 1 blocking");
}

TEST(StatusJson, EveryFieldReadsBackThroughAJsonParser) {
  SlotStatus s;
  s.slot = "odd\"slot\\name\n\t\x01";
  s.plugin = "pgoutput";
  s.database = "app é";
  s.active = true;
  s.active_pid = 4242;
  s.confirmed_flush_lsn = "0/16B3748";
  s.restart_lsn = "0/16B3710";
  s.current_wal_lsn = "0/16C0000";
  s.lag_bytes = 51384;
  s.retained_wal_bytes = 51440;
  s.wal_status = "reserved";
  s.safe_wal_size_bytes = 1'073'741'824;

  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  const std::string json = to_json(s);
  ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
  EXPECT_EQ(doc["slot"].get_string().value(), s.slot);
  EXPECT_EQ(doc["plugin"].get_string().value(), "pgoutput");
  EXPECT_EQ(doc["database"].get_string().value(), s.database);
  EXPECT_TRUE(doc["active"].get_bool().value());
  EXPECT_EQ(doc["active_pid"].get_int64().value(), 4242);
  EXPECT_EQ(doc["confirmed_flush_lsn"].get_string().value(), "0/16B3748");
  EXPECT_EQ(doc["restart_lsn"].get_string().value(), "0/16B3710");
  EXPECT_EQ(doc["current_wal_lsn"].get_string().value(), "0/16C0000");
  EXPECT_EQ(doc["lag_bytes"].get_int64().value(), 51384);
  EXPECT_EQ(doc["retained_wal_bytes"].get_int64().value(), 51440);
  EXPECT_EQ(doc["wal_status"].get_string().value(), "reserved");
  EXPECT_EQ(doc["safe_wal_size_bytes"].get_int64().value(), 1'073'741'824);
}

TEST(StatusJson, ColumnsOfNewerMajorsAreReadBackAndNullWhereTheServerLacksThem) {
  SlotStatus s;
  s.slot = "standby_copy";
  s.state.failover = true;
  s.state.synced = true;
  s.state.conflicting = false;
  s.state.inactive_since = "2026-12-01 09:00:00.123+00";
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  const std::string json = to_json(s);
  ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
  EXPECT_TRUE(doc["failover"].get_bool().value());
  EXPECT_TRUE(doc["synced"].get_bool().value());
  EXPECT_FALSE(doc["conflicting"].get_bool().value());
  EXPECT_TRUE(doc["invalidation_reason"].is_null());
  EXPECT_EQ(doc["inactive_since"].get_string().value(), "2026-12-01 09:00:00.123+00");

  SlotStatus on_15;
  on_15.slot = "old";
  const std::string old_json = to_json(on_15);
  ASSERT_EQ(parser.parse(old_json).get(doc), simdjson::SUCCESS) << old_json;
  for (const char* column : {"failover", "synced", "conflicting", "invalidation_reason", "inactive_since"}) {
    EXPECT_TRUE(doc[column].is_null()) << column << " in " << old_json;
  }
}

TEST(StatusJson, AbsentValuesAreNull) {
  SlotStatus s;
  s.slot = "idle";
  const std::string json = to_json(s);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
  EXPECT_FALSE(doc["active"].get_bool().value());
  EXPECT_TRUE(doc["active_pid"].is_null());
  EXPECT_TRUE(doc["confirmed_flush_lsn"].is_null());
  EXPECT_TRUE(doc["wal_status"].is_null());
  EXPECT_TRUE(doc["safe_wal_size_bytes"].is_null());
}

TEST(StatusText, NamesEveryField) {
  SlotStatus s;
  s.slot = "pgoutbox";
  s.active = true;
  s.active_pid = 7;
  s.lag_bytes = 12;
  const std::string text = to_text(s);
  EXPECT_NE(text.find("active              yes (pid 7)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lag                 12 bytes\n"), std::string::npos) << text;
  EXPECT_NE(text.find("safe_wal_size       unlimited\n"), std::string::npos) << text;
  EXPECT_NE(text.find("conflicting         -\n"), std::string::npos) << text;
  s.state.conflicting = true;
  s.state.inactive_since = "2026-12-01 09:00:00+00";
  const std::string on_17 = to_text(s);
  EXPECT_NE(on_17.find("conflicting         yes\n"), std::string::npos) << on_17;
  EXPECT_NE(on_17.find("inactive_since      2026-12-01 09:00:00+00\n"), std::string::npos) << on_17;
}

}  // namespace
}  // namespace pgoutbox::diagnostics
