#include "collector.h"

#include <stdexcept>

#include <fmt/format.h>

namespace pgoutbox::test {

const std::optional<std::string>& CollectedRow::value(const std::string& column) const {
  for (std::size_t i = 0; i < columns.size(); ++i) {
    if (columns[i] == column) return values[i];
  }
  throw std::out_of_range("no column " + column + " in " + table);
}

void Collector::on_data(const replication::XLogData& data) {
  const auto result = pgoutput::decode(data.payload);
  if (!result) {
    errors.push_back(result.error().to_string());
    return;
  }
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, pgoutput::BeginData>) {
          if (current_) errors.push_back("Begin inside a transaction");
          current_ = CollectedTxn{m.xid, m.final_lsn, {}, {}, {}, {}};
        } else if constexpr (std::is_same_v<T, pgoutput::CommitData>) {
          if (!current_) {
            errors.push_back("Commit outside a transaction");
            return;
          }
          if (m.commit_lsn != current_->final_lsn) errors.push_back("Commit LSN differs from Begin's final LSN");
          if (data.start != m.end_lsn) errors.push_back("Commit's XLogData start is not its end_lsn");
          current_->commit_lsn = m.commit_lsn;
          current_->end_lsn = m.end_lsn;
          txns.push_back(std::move(*current_));
          current_.reset();
        } else if constexpr (std::is_same_v<T, pgoutput::RelationData>) {
          relations_.apply(m);
          ++relation_messages;
        } else if constexpr (std::is_same_v<T, pgoutput::InsertData>) {
          const auto* rel = relations_.find(m.relid);
          if (rel == nullptr || !current_) {
            errors.push_back(fmt::format("Insert for relid {} without Relation or Begin", m.relid));
            return;
          }
          CollectedRow row{rel->nspname, rel->relname, rel->relid, {}, {}, {}, rel->generation};
          if (m.new_tuple.columns.size() != rel->columns.size()) errors.push_back("tuple width differs from Relation");
          for (std::size_t i = 0; i < m.new_tuple.columns.size() && i < rel->columns.size(); ++i) {
            const auto& col = m.new_tuple.columns[i];
            row.columns.push_back(rel->columns[i].name);
            row.kinds.push_back(col.kind);
            if (col.kind == pgoutput::ColumnKind::null) {
              row.values.emplace_back(std::nullopt);
            } else {
              row.values.emplace_back(std::string(col.bytes));
            }
          }
          ++rows_seen;
          current_->rows.push_back(std::move(row));
        } else if constexpr (std::is_same_v<T, pgoutput::MessageData>) {
          CollectedMessage msg{m.transactional(), std::string(m.prefix), std::string(m.content)};
          if (m.transactional()) {
            if (!current_) {
              errors.push_back("transactional message outside a transaction");
              return;
            }
            current_->messages.push_back(std::move(msg));
          } else {
            standalone_messages.push_back(std::move(msg));
          }
        }
      },
      result.message());
}

Session::Session(const std::string& dsn, const replication::StartOptions& start, replication::StreamOptions options)
    : connection(replication::Connection::open(dsn, true, "pgoutbox-test")) {
  connection.start_replication(start);
  stream = std::make_unique<replication::Stream>(io, connection, collector, options);
  stream->start([this](const replication::StreamEnd& end) { ended = end; });
}

Session::~Session() { stream.reset(); }

void Session::stop_and_wait() {
  stream->stop();
  run_until([&] { return ended.has_value(); }, std::chrono::seconds(30));
  if (!ended) throw std::runtime_error("stream did not end after stop()");
}

}  // namespace pgoutbox::test
