#include "pgoutbox/relay/record_builder.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "pgoutbox/config/topic_template.h"
#include "pgoutbox/replication/connection.h"

namespace pgoutbox::relay {

RecordBuilder::RecordBuilder(const config::Config& config, outbox::CatalogLookups catalog)
    : max_message_bytes_(outbox::max_message_bytes(config.kafka.properties)),
      mapping_(config.tables, config.provenance_headers, std::move(catalog.ancestry), std::move(catalog.not_null)),
      messages_(config.messages, config.provenance_headers),
      reserved_topics_(config::reserved_topics(config)) {}

std::optional<Built> RecordBuilder::row(const pgoutput::InsertData& insert, const outbox::TxnContext& txn) {
  const auto* relation = relations_.find(insert.relid);
  if (relation == nullptr) throw std::logic_error(fmt::format("Insert for relid {} out of sequence", insert.relid));
  const outbox::ResolvedTable* table = nullptr;
  try {
    table = mapping_.resolve(*relation);
  } catch (const replication::PgError& e) {
    throw replication::PgError(
        fmt::format("looking up relation {}.{} in the catalog: {}", relation->nspname, relation->relname, e.what()),
        e.sqlstate());
  }
  if (table == nullptr) return std::nullopt;
  auto& newest = newest_row_commit_[table->label()];
  newest = std::max(newest, txn.commit_time_unix_us);
  return finish(
      Built{table->build(insert.new_tuple, txn), fmt::format("table {}.{}", relation->nspname, relation->relname)});
}

Built RecordBuilder::message(const pgoutput::MessageData& message, const outbox::TxnContext& txn) const {
  // An envelope above the largest record the producer may send is poison, never parsed
  // (outbox/envelope.h).
  Built built{messages_.build(*messages_.find(message.prefix), message.content, txn, max_message_bytes_),
              fmt::format("logical message with prefix \"{}\" at {}", message.prefix, message.lsn.to_string())};
  if (auto* record = std::get_if<outbox::Record>(&built.record); record != nullptr && !message.transactional()) {
    auto event_id = record->event_id;
    built.record = outbox::Poison{std::move(event_id),
                                  "written with pg_logical_emit_message(false, ...): a non-transactional message is "
                                  "sent even when its transaction rolls back, so it is not published; write it with "
                                  "transactional = true",
                                  "NON_TRANSACTIONAL", std::move(*record)};
  }
  return finish(std::move(built));
}

std::optional<std::int64_t> RecordBuilder::newest_row_commit(std::string_view label) const {
  const auto it = newest_row_commit_.find(label);
  if (it == newest_row_commit_.end()) return std::nullopt;
  return it->second;
}

Built RecordBuilder::finish(Built built) const {
  auto* record = std::get_if<outbox::Record>(&built.record);
  if (record != nullptr && config::is_reserved_topic(reserved_topics_, record->topic)) {
    // A row must not pass for pgoutbox's own records (docs/spec.md I11); refused at load where
    // the template shows it can, and here whatever the template.
    std::string reason = fmt::format(
        "the topic \"{}\" is reserved for pgoutbox's own records (checkpoint.topic, poison.dead_letter_topic)",
        record->topic);
    record->topic.clear();
    built.record = outbox::Poison{record->event_id, std::move(reason), "RESERVED_TOPIC", std::move(*record)};
  }
  if (!extra_headers_.empty()) {
    auto* poisoned = std::get_if<outbox::Poison>(&built.record);
    auto& headers = poisoned != nullptr ? poisoned->record.headers : std::get<outbox::Record>(built.record).headers;
    headers.insert(headers.end(), extra_headers_.begin(), extra_headers_.end());
  }
  return built;
}

}  // namespace pgoutbox::relay
