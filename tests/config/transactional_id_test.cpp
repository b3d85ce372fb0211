// Exactly-once's transactional ids (config/transactional_id.h): no two slots share one, derived
// or alternate (issue 37 item 6), and an earlier version's derived id is known where it differs.

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>

#include "pgoutbox/config/transactional_id.h"

namespace pgoutbox::config {
namespace {

// Database "shop" with slot "foo" and database "shop-foo" with slot "alt" shared an id: the
// first's alternate was the second's own, and the two relays fenced each other forever.
TEST(TransactionalIds, NoTwoSlotsShareAnIdOrAnAlternateOrAProbe) {
  const std::vector<std::tuple<std::string, std::string, std::string>> slots = {
      {"7", "shop", "foo"},     {"7", "shop-foo", "alt"},   {"7", "shop-foo", "check"},
      {"7", "shop", "foo_alt"}, {"7", "shop%2D", "foo"},    {"7", "shop-", "foo"},
      {"7", "shop", "x"},       {"7", "shop-x", "y"},       {"7", "a-b-c", "d"},
      {"7", "a", "b_c_d"},      {"7", "a-b", "c_d"},        {"7", "-", "x"},
      {"7", "%", "x"},          {"7", "%25", "x"},          {"77", "shop", "foo"},
      {"7", "7-shop", "foo"},   {"7", "shop-foo-alt", "x"}, {"7", "", "shop_foo_alt"},
      {"7", "shop foo", "alt"}, {"7", "Shop", "foo"},
  };
  std::map<std::string, std::string> owner;  // each id, and whose it is
  const auto claim = [&](const std::string& id, const std::string& whose) {
    const auto [it, fresh] = owner.emplace(id, whose);
    EXPECT_TRUE(fresh) << id << " is both " << it->second << " and " << whose;
  };
  for (const auto& [system, database, slot] : slots) {
    const auto id = derived_transactional_id(system, database, slot);
    const auto whose = system + "/" + database + "/" + slot;
    claim(id, whose);
    claim(alternate_transactional_id(id), whose + " (alternate)");
    claim(id + std::string(kProbeSuffix), whose + " (probe)");
  }
}

TEST(TransactionalIds, TheDerivedIdChangesOnlyForADatabaseNameWithADashOrAPercent) {
  EXPECT_EQ(derived_transactional_id("7", "shop", "foo"), "pgoutbox-7-shop-foo");
  EXPECT_EQ(legacy_transactional_id("7", "shop", "foo"), "");
  EXPECT_EQ(derived_transactional_id("7", "shop-eu", "foo"), "pgoutbox-7-shop%2Deu-foo");
  EXPECT_EQ(legacy_transactional_id("7", "shop-eu", "foo"), "pgoutbox-7-shop-eu-foo");
  EXPECT_EQ(derived_transactional_id("7", "100%", "foo"), "pgoutbox-7-100%25-foo");
}

TEST(TransactionalIds, AnExplicitIdCannotBeADerivedOneNorAnothersAlternateOrProbe) {
  for (const auto* id : {"pgoutbox-7-shop-foo", "pgoutbox-0", "orders-alt", "orders-check", "pgoutbox-7-shop-foo-alt"})
    EXPECT_TRUE(transactional_id_collision(id)) << id;
  for (const auto* id : {"orders", "pgoutbox-orders", "pgoutbox", "orders-alternate", "orders-checkout", "alt"})
    EXPECT_FALSE(transactional_id_collision(id)) << id;
}

// Every checkpoint carries the id, and the reader decodes no record over 8 KiB (issue 38 item 2):
// an explicit id is at most 1,024 bytes.
TEST(TransactionalIds, AnExplicitIdLongerThanACheckpointMayCarryIsRefused) {
  EXPECT_FALSE(transactional_id_collision(std::string(kMaxTransactionalIdBytes, 'x')));
  const auto why = transactional_id_collision(std::string(kMaxTransactionalIdBytes + 1, 'x'));
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("1025 bytes"), std::string::npos) << *why;
}

}  // namespace
}  // namespace pgoutbox::config
