#pragma once

// The mapping of one configured outbox table onto Kafka records (docs/spec.md "Attaching to
// existing outbox tables"): which column is the event id, routing value, key, payload, type,
// headers and timestamp, and the topic template. Resolved against the Relation message the
// stream sent for the table — a missing column or an unusable type is an error naming the table
// and the column — and re-resolved whenever Postgres sends a new Relation for it.

#include <cstdint>
#include <functional>
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

// A column the mapping of a table reads, and the role it plays there ("payload", "key", …, as
// the mapping's errors name it). The default "type" column is listed too: it is read when the
// table has it.
struct MappedColumn {
  std::string role;
  std::string column;
};
std::vector<MappedColumn> mapped_columns(const config::TableConfig& table);

// The names of a relation's NOT NULL columns as the catalog says now (debezium-json's schemas
// say whether the key and the payload are optional, as Debezium reads them from the catalog).
using NotNullLookup = std::function<std::vector<std::string>(pgoutput::Oid)>;

// A table mapping resolved against one Relation description: column indexes and payload kind.
class ResolvedTable {
 public:
  // Throws MappingError naming table and column when the relation cannot serve the mapping.
  // `not_null`: the relation's NOT NULL columns, read only for format debezium-json (without
  // it, every column counts as nullable).
  ResolvedTable(const config::TableConfig& table, const pgoutput::Relation& relation, bool provenance_headers,
                const std::vector<std::string>& not_null = {});

  std::variant<Record, Poison> build(const pgoutput::TupleData& tuple, const TxnContext& txn) const;
  std::uint64_t relation_generation() const { return generation_; }
  // The configured table, as schema.name (each record's `table`).
  const std::string& label() const { return label_; }

 private:
  struct TopicPart {
    std::string literal;
    int column = -1;  // >= 0: the text of this column
  };
  enum class PayloadKind { text, bytea };
  // debezium-json's schemas of the key and the payload, resolved from their columns' types.
  struct DebeziumForm {
    std::string key_schema;
    bool key_is_number = false;
    std::string value_schema;
  };
  void to_debezium_json(Record& rec, const std::optional<std::string_view>& key,
                        const std::optional<std::string_view>& payload,
                        const std::function<void(std::string, std::string)>& fail) const;
  static std::vector<TopicPart> resolve_template(const config::TableConfig& table, const pgoutput::Relation& relation,
                                                 const std::string& text, const char* role, const char* key);
  static std::optional<std::string> expand_template(const std::vector<TopicPart>& parts,
                                                    const pgoutput::TupleData& tuple);
  // CloudEvents: the type attribute's template and the payload's content type.
  struct CloudEventForm {
    std::vector<TopicPart> type;
    std::string content_type;
    bool json_by_type = false;  // a json or jsonb payload: valid JSON without a parse
  };
  void to_cloudevent(Record& rec, const pgoutput::TupleData& tuple,
                     const std::function<void(std::string, std::string)>& fail) const;

  const config::TableConfig* table_;
  std::string label_;  // schema.name, each record's `table`
  std::uint64_t generation_;
  bool provenance_;
  int id_ = -1;
  int key_ = -1;
  int payload_ = -1;
  int type_ = -1;
  int headers_ = -1;
  int timestamp_ = -1;
  PayloadKind payload_kind_ = PayloadKind::text;
  std::optional<DebeziumForm> debezium_;
  std::optional<CloudEventForm> cloudevent_;
  bool validate_json_ = false;
  std::vector<TopicPart> topic_;
  std::optional<std::regex> topic_pattern_;  // the table's topic_pattern, when set
};

// The ancestors of a relation by OID through partitioning and inheritance, nearest first, as
// (schema, name); nullopt when the catalog can no longer say whose family the relation was in
// (dropped, detached or taken out of the publication since). May throw (the catalog could not
// be read): the error passes through resolve() unchanged.
using Ancestors = std::vector<std::pair<std::string, std::string>>;
using AncestryLookup = std::function<std::optional<Ancestors>(pgoutput::Oid)>;

// What the catalog tells the mapping, on a SQL connection of its own (replication/catalog.h).
struct CatalogLookups {
  AncestryLookup ancestry;
  NotNullLookup not_null;
};

// All configured tables and their families. A relation is served by the configured table of
// its own name, else by the nearest configured ancestor (a leaf partition published without
// publish_via_partition_root, a sub-partition, an inheritance child), with that table's
// mapping resolved by column name against the relation's own columns (a child may order them
// differently or have more). Resolutions are cached per relid and replaced when the relation
// cache says the description changed; ancestry is looked up once per OID.
class Mapping {
 public:
  // Without `ancestry`, only relations named like a configured table are mapped.
  Mapping(std::vector<config::TableConfig> tables, bool provenance_headers, AncestryLookup ancestry = {},
          NotNullLookup not_null = {});

  // nullptr when the relation is in no configured table's family (its rows are ignored).
  // Throws MappingError when it is in one but cannot be mapped, or when it was dropped and
  // may have been in one (see resolve's comment).
  const ResolvedTable* resolve(const pgoutput::Relation& relation);

  const std::vector<config::TableConfig>& tables() const { return tables_; }

 private:
  const config::TableConfig* configured(const std::string& schema, const std::string& name) const;
  const config::TableConfig* family_of(const pgoutput::Relation& relation);

  std::vector<config::TableConfig> tables_;
  bool provenance_;
  AncestryLookup ancestry_;
  NotNullLookup not_null_;
  struct Entry {
    std::uint64_t generation = 0;        // of the relation description it was resolved from
    std::optional<ResolvedTable> table;  // nullopt: not a configured outbox table
  };
  std::unordered_map<pgoutput::Oid, Entry> resolved_;
  std::unordered_map<pgoutput::Oid, std::optional<Ancestors>> ancestors_;
};

// Helpers with their own tests.
// Postgres's bytea text output ("\x" + hex) back to raw bytes; nullopt when malformed.
std::optional<std::string> decode_bytea_hex(std::string_view text);
// An ISO timestamp as Postgres prints it with TimeZone=UTC and DateStyle=ISO
// ("2026-11-29 08:00:00.123456+00", offset optional) to Unix milliseconds; nullopt otherwise.
std::optional<std::int64_t> parse_pg_timestamp_ms(std::string_view text);

}  // namespace pgoutbox::outbox
