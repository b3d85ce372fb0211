#include "pgoutbox/pgoutput/relation_cache.h"

#include <string_view>

namespace pgoutbox::pgoutput {

namespace {
// proto.c logicalrep_write_namespace sends "" for pg_catalog to save space;
// logicalrep_read_namespace maps it back.
constexpr std::string_view kCatalogNamespace = "pg_catalog";
// LOGICALREP_IS_REPLICA_IDENTITY in proto.c: the column is part of the replica identity.
constexpr std::uint8_t kReplicaIdentityFlag = 1;
}  // namespace

int Relation::column_index(std::string_view name) const {
  for (std::size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

const Relation& RelationCache::apply(const RelationData& message) {
  // Replaced in place: unordered_map keeps references to elements valid across rehashing, and a
  // holder of the old reference tells the change by the generation.
  Relation& entry = relations_[message.relid];
  entry.relid = message.relid;
  entry.nspname.assign(message.nspname.empty() ? kCatalogNamespace : message.nspname);
  entry.relname.assign(message.relname);
  entry.replident = message.replident;
  entry.columns.clear();
  entry.columns.reserve(message.columns.size());
  for (const RelationColumn& column : message.columns) {
    entry.columns.push_back(
        Column{std::string(column.name), column.type_oid, column.typmod, (column.flags & kReplicaIdentityFlag) != 0});
  }
  entry.generation = next_generation_++;
  return entry;
}

const Relation* RelationCache::find(Oid relid) const {
  const auto it = relations_.find(relid);
  return it == relations_.end() ? nullptr : &it->second;
}

}  // namespace pgoutbox::pgoutput
