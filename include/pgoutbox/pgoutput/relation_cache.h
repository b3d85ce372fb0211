#pragma once

// Relation descriptions by relid. A Relation message replaces the entry for its relid
// (sent before a relation's first change in a session and again after any relcache
// invalidation, not only DDL: docs/pgoutput.md §4.4). Entries own their strings, since the
// message bytes they came from are gone by the time a later Insert refers to them.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "pgoutbox/pgoutput/messages.h"

namespace pgoutbox::pgoutput {

struct Column {
  std::string name;
  Oid type_oid = 0;
  std::int32_t typmod = -1;
  bool is_key = false;
};

struct Relation {
  Oid relid = 0;
  std::string nspname;  // "pg_catalog" when the message said ""
  std::string relname;
  char replident = 'd';
  std::vector<Column> columns;
  // Bumped each time this relid's description is replaced, so holders of derived state (a
  // column mapping) can tell it is stale.
  std::uint64_t generation = 0;

  // Index of the column called `name`, or -1.
  int column_index(std::string_view name) const;
};

class RelationCache {
 public:
  // Stores (or replaces) the description and returns the stored entry.
  const Relation& apply(const RelationData& message);
  // nullptr when no Relation message for relid has been seen.
  const Relation* find(Oid relid) const;
  void clear() { relations_.clear(); }
  std::size_t size() const { return relations_.size(); }

 private:
  std::unordered_map<Oid, Relation> relations_;
  std::uint64_t next_generation_ = 1;
};

}  // namespace pgoutbox::pgoutput
