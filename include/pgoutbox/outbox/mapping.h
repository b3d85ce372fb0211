#pragma once

// The mapping of one configured outbox table onto Kafka records (SPEC.md "Attaching to
// existing outbox tables"): which column is the event id, routing value, key, payload, type,
// headers and timestamp, and the topic template. Resolved against the Relation message the
// stream sent for the table — a missing column or an unusable type is an error naming the table
// and the column — and re-resolved whenever Postgres sends a new Relation for it.

#include <cstdint>
#include <memory>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "pgoutbox/config/config.h"
#include "pgoutbox/lsn.h"
#include "pgoutbox/outbox/record.h"
#include "pgoutbox/pgoutput/messages.h"
#include "pgoutbox/pgoutput/relation_cache.h"

namespace pgoutbox::outbox {

// The configured table and the real one disagree: not retryable, the operator must act.
class MappingError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a record may say about the transaction it came from.
struct TxnContext {
  Lsn commit_lsn;
  std::int64_t commit_time_unix_us = 0;
  std::uint32_t xid = 0;
};

// A table mapping resolved against one Relation description: column indexes and payload kind.
class ResolvedTable {
 public:
  // Throws MappingError naming table and column when the relation cannot serve the mapping.
  ResolvedTable(const config::TableConfig& table, const pgoutput::Relation& relation, bool provenance_headers);

  std::variant<Record, Poison> build(const pgoutput::TupleData& tuple, const TxnContext& txn) const;
  std::uint64_t relation_generation() const { return generation_; }

 private:
  struct TopicPart {
    std::string literal;
    int column = -1;  // >= 0: the text of this column
  };
  enum class PayloadKind { text, bytea };

  const config::TableConfig* table_;
  std::uint64_t generation_;
  bool provenance_;
  int id_ = -1;
  int key_ = -1;
  int payload_ = -1;
  int type_ = -1;
  int headers_ = -1;
  int timestamp_ = -1;
  PayloadKind payload_kind_ = PayloadKind::text;
  bool validate_json_ = false;
  std::vector<TopicPart> topic_;
  std::optional<std::regex> topic_pattern_;  // the table's topic_pattern, when set
};

// All configured tables, found by the relation's schema and name; resolutions cached per relid
// and replaced when the relation cache says the description changed.
class Mapping {
 public:
  Mapping(std::vector<config::TableConfig> tables, bool provenance_headers);

  // nullptr when the relation is not a configured outbox table (its rows are ignored).
  // Throws MappingError when it is configured but cannot be mapped.
  const ResolvedTable* resolve(const pgoutput::Relation& relation);

  const std::vector<config::TableConfig>& tables() const { return tables_; }

 private:
  std::vector<config::TableConfig> tables_;
  bool provenance_;
  struct Entry {
    std::uint64_t generation = 0;  // of the relation description it was resolved from
    std::optional<ResolvedTable> table;  // nullopt: not a configured outbox table
  };
  std::unordered_map<pgoutput::Oid, Entry> resolved_;
};

// Helpers with their own tests.
// Postgres's bytea text output ("\x" + hex) back to raw bytes; nullopt when malformed.
std::optional<std::string> decode_bytea_hex(std::string_view text);
// An ISO timestamp as Postgres prints it with TimeZone=UTC and DateStyle=ISO
// ("2026-11-29 08:00:00.123456+00", offset optional) to Unix milliseconds; nullopt otherwise.
std::optional<std::int64_t> parse_pg_timestamp_ms(std::string_view text);

}  // namespace pgoutbox::outbox
