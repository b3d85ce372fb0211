#pragma once

// What the stream's changes become (docs/spec.md, the table mapping): an insert into a configured
// table (or a partition or child of one) and a logical message of a configured prefix become a
// record, or poison when they cannot (I8); every other change is not pgoutbox's. Whatever the
// mapping says, no record may route to pgoutbox's own topics (I11), and every record carries the
// relay's extra headers.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "pgoutbox/config/config.h"
#include "pgoutbox/outbox/envelope.h"
#include "pgoutbox/outbox/mapping.h"
#include "pgoutbox/pgoutput/messages.h"
#include "pgoutbox/pgoutput/relation_cache.h"

namespace pgoutbox::relay {

struct Built {
  std::variant<outbox::Record, outbox::Poison> record;
  std::string from;  // where it came from, for a poison record's reason
};

class RecordBuilder {
 public:
  // `catalog` tells whose partition or inheritance child a relation is and which of its columns
  // are NOT NULL (outbox::Mapping).
  RecordBuilder(const config::Config& config, outbox::CatalogLookups catalog);

  void add_header(outbox::Header header) { extra_headers_.push_back(std::move(header)); }
  void relation(const pgoutput::RelationData& relation) { relations_.apply(relation); }

  // An insert of the transaction `txn`. Nullopt: not a configured table's row. Throws
  // std::logic_error for a relation the stream never described, outbox::MappingError, and
  // replication::PgError when the catalog cannot say whose partition or child it is.
  std::optional<Built> row(const pgoutput::InsertData& insert, const outbox::TxnContext& txn);
  bool configured(std::string_view prefix) const { return messages_.find(prefix).has_value(); }
  // A logical message of a configured prefix. A non-transactional one is poison
  // NON_TRANSACTIONAL: it is sent even when its transaction rolls back (messages.cpp).
  Built message(const pgoutput::MessageData& message, const outbox::TxnContext& txn) const;

  // The commit time (Unix microseconds) of the newest transaction that brought a row of the
  // configured table `label` (schema.name); nullopt before the first.
  std::optional<std::int64_t> newest_row_commit(std::string_view label) const;

 private:
  Built finish(Built built) const;

  std::size_t max_message_bytes_;
  outbox::Mapping mapping_;
  outbox::MessageMapping messages_;
  std::vector<std::string> reserved_topics_;  // checkpoint and dead-letter topics: no row routes there
  std::vector<outbox::Header> extra_headers_;
  pgoutput::RelationCache relations_;
  std::map<std::string, std::int64_t, std::less<>> newest_row_commit_;  // by configured table
};

}  // namespace pgoutbox::relay
