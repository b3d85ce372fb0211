#include "pgoutbox/outbox/cloudevents.h"

#include <gtest/gtest.h>

namespace pgoutbox::outbox::cloudevents {
namespace {

TEST(CloudEvents, TimeIsRfc3339InUtcWithMilliseconds) {
  EXPECT_EQ(rfc3339(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(rfc3339(1'700'000'000'123), "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(rfc3339(951'782'399'999), "2000-02-28T23:59:59.999Z");
  EXPECT_EQ(rfc3339(951'868'800'007), "2000-03-01T00:00:00.007Z");  // after a leap day
  EXPECT_EQ(rfc3339(253'402'300'799'999), "9999-12-31T23:59:59.999Z");
  // Beyond four digits of year (Postgres allows them), written as they are.
  EXPECT_EQ(rfc3339(253'402'300'800'000), "10000-01-01T00:00:00.000Z");
}

TEST(CloudEvents, BinaryModeMovesTheAttributesIntoHeaders) {
  Record rec;
  rec.value = "{}";
  rec.headers.push_back({"id", "e-1"});
  rec.headers.push_back({"traceparent", "00-a-b-01"});
  Attributes a{"e-1", "/db/public.outbox", "Created", rfc3339(0), std::string("k"), std::nullopt, "application/json"};
  EXPECT_FALSE(apply(rec, a, Mode::binary, false, true));
  ASSERT_EQ(rec.headers.size(), 10U);
  EXPECT_EQ(rec.headers[2].name, "ce_specversion");
  EXPECT_EQ(rec.headers[3].value, "e-1");
  EXPECT_EQ(rec.headers[4].value, "/db/public.outbox");
  EXPECT_EQ(rec.headers[5].value, "Created");
  EXPECT_EQ(rec.headers[6].value, "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(rec.headers[7].value, "k");
  EXPECT_EQ(rec.headers[8].name, "ce_traceparent");  // from the record's own traceparent header
  EXPECT_EQ(rec.headers[8].value, "00-a-b-01");
  EXPECT_EQ(rec.headers[9].value, "application/json");
  EXPECT_EQ(rec.value, "{}");
}

TEST(CloudEvents, StructuredModeRefusesDataThatIsNotJson) {
  Record rec;
  rec.value = "not json";
  Attributes a{"e", "/s", "T", rfc3339(0), std::nullopt, std::nullopt, "application/json"};
  const auto why = apply(rec, a, Mode::structured, false, false);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("not JSON"), std::string::npos) << *why;
  rec.value = "\x01\x02";
  EXPECT_FALSE(apply(rec, a, Mode::structured, true, false));  // bytes go as data_base64
  EXPECT_NE(rec.value.find(R"("data_base64":"AQI=")"), std::string::npos) << rec.value;
}

}  // namespace
}  // namespace pgoutbox::outbox::cloudevents
