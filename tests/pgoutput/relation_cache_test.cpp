// RelationCache: a Relation message replaces the description for its relid (docs/pgoutput.md §4.4),
// entries own their strings, and "" on the wire means pg_catalog (proto.c
// logicalrep_write_namespace).

#include "pgoutbox/pgoutput/relation_cache.h"

#include <gtest/gtest.h>

#include <string>

#include "message_builder.h"
#include "pgoutbox/pgoutput/decoder.h"
#include "test_vectors.h"

namespace pgoutbox::pgoutput::testing {
namespace {

RelationData relation(Oid relid, std::string_view nspname, std::string_view relname,
                      std::vector<RelationColumn> columns, char replident = 'd') {
  RelationData r;
  r.relid = relid;
  r.nspname = nspname;
  r.relname = relname;
  r.replident = replident;
  r.columns = std::move(columns);
  return r;
}

TEST(RelationCache, StoresOwnedCopiesOfADecodedRelation) {
  RelationCache cache;
  {
    // The message bytes go away before the cache is read, as they do after each CopyData.
    const Bytes bytes = MessageBuilder('R')
                            .int32(16384)
                            .string("public")
                            .string("outbox")
                            .int8('i')
                            .int16(2)
                            .relation_column(1, "id", 20, -1)
                            .relation_column(0, "payload", 3802, -1);
    cache.apply(decode_to<RelationData>(bytes));
  }
  const Relation* r = cache.find(16384);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->relid, 16384U);
  EXPECT_EQ(r->nspname, "public");
  EXPECT_EQ(r->relname, "outbox");
  EXPECT_EQ(r->replident, 'i');
  ASSERT_EQ(r->columns.size(), 2U);
  EXPECT_EQ(r->columns[0].name, "id");
  EXPECT_EQ(r->columns[0].type_oid, 20U);
  EXPECT_EQ(r->columns[0].typmod, -1);
  EXPECT_TRUE(r->columns[0].is_key);
  EXPECT_EQ(r->columns[1].name, "payload");
  EXPECT_EQ(r->columns[1].type_oid, 3802U);
  EXPECT_FALSE(r->columns[1].is_key);
  EXPECT_EQ(cache.size(), 1U);
}

TEST(RelationCache, EmptyNamespaceMeansPgCatalog) {
  RelationCache cache;
  const Relation& r = cache.apply(relation(1259, "", "pg_class", {}));
  EXPECT_EQ(r.nspname, "pg_catalog");
  EXPECT_EQ(cache.find(1259)->nspname, "pg_catalog");
}

TEST(RelationCache, NewRelationMessageReplacesAndBumpsGeneration) {
  RelationCache cache;
  const Relation& first = cache.apply(relation(16384, "public", "outbox", {{1, "id", 23, -1}, {0, "a", 25, -1}}));
  const std::uint64_t first_generation = first.generation;

  // ALTER TABLE … RENAME / ADD COLUMN arrive as a new Relation for the same relid.
  const Relation& second =
      cache.apply(relation(16384, "app", "outbox2", {{1, "id", 20, -1}, {0, "b", 25, -1}, {0, "a", 25, -1}}, 'f'));
  EXPECT_GT(second.generation, first_generation);
  EXPECT_EQ(cache.size(), 1U);
  const Relation* r = cache.find(16384);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->generation, second.generation);
  EXPECT_EQ(r->nspname, "app");
  EXPECT_EQ(r->relname, "outbox2");
  EXPECT_EQ(r->replident, 'f');
  ASSERT_EQ(r->columns.size(), 3U);
  EXPECT_EQ(r->columns[0].type_oid, 20U);
  EXPECT_EQ(r->column_index("a"), 2);
  EXPECT_EQ(r->column_index("b"), 1);

  // The same description again (a relcache invalidation, not DDL) is still a new generation.
  const std::uint64_t second_generation = r->generation;
  cache.apply(relation(16384, "app", "outbox2", {{1, "id", 20, -1}}));
  EXPECT_GT(cache.find(16384)->generation, second_generation);
}

TEST(RelationCache, GenerationsAreUniqueAcrossRelidsAndClear) {
  RelationCache cache;
  const std::uint64_t a = cache.apply(relation(1, "s", "a", {})).generation;
  const std::uint64_t b = cache.apply(relation(2, "s", "b", {})).generation;
  EXPECT_NE(a, b);
  EXPECT_EQ(cache.find(1)->generation, a);  // applying relid 2 left relid 1 alone

  // After clear() (a reconnect) a relid comes back with a generation no holder has seen.
  cache.clear();
  EXPECT_EQ(cache.size(), 0U);
  EXPECT_EQ(cache.find(1), nullptr);
  const std::uint64_t again = cache.apply(relation(1, "s", "a", {})).generation;
  EXPECT_GT(again, a);
  EXPECT_GT(again, b);
}

TEST(RelationCache, FindUnknownRelidIsNull) {
  RelationCache cache;
  EXPECT_EQ(cache.find(42), nullptr);
  cache.apply(relation(41, "s", "t", {}));
  EXPECT_EQ(cache.find(42), nullptr);
  EXPECT_NE(cache.find(41), nullptr);
}

TEST(RelationColumnIndex, FindsByExactName) {
  RelationCache cache;
  const Relation& r =
      cache.apply(relation(7, "public", "t", {{1, "id", 23, -1}, {0, "Topic", 25, -1}, {0, "topic", 25, -1}}));
  EXPECT_EQ(r.column_index("id"), 0);
  EXPECT_EQ(r.column_index("Topic"), 1);  // quoted identifiers keep their case
  EXPECT_EQ(r.column_index("topic"), 2);
  EXPECT_EQ(r.column_index("missing"), -1);
  EXPECT_EQ(r.column_index(""), -1);
}

TEST(RelationColumnIndex, EmptyRelationHasNoColumns) {
  Relation r;
  EXPECT_EQ(r.column_index("id"), -1);
}

}  // namespace
}  // namespace pgoutbox::pgoutput::testing
