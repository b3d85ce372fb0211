#pragma once

// Rows already in an outbox table, published through the relay's own pipeline: the backfill at
// slot creation (tables[].backfill, read in the snapshot the new slot exported) and `pgoutbox
// republish` (read in a snapshot of its own). Both read with one RowReader and hand the rows to a
// Relay as a RowSource: each chunk of the cursor becomes one transaction of pgoutput messages
// (Relation, Begin, Insert…, Commit) with positions of its own, so the rows go through the same
// decoder, mapping, producer, acknowledgements, caps and poison policy as the stream's, and the
// relay's flush position says which chunks Kafka has acknowledged.
//
// The exported snapshot lives only while the replication connection that created the slot runs
// no other command: START_REPLICATION waits until every backfilled record is acknowledged
// (docs/pgoutput.md §1). Whether a backfill finished is kept beside the slot in two physical
// slots that pin no WAL (BackfillMarkers): a restart in the middle drops the slot and backfills
// again from the start, publishing again what the first attempt published (consumers deduplicate
// by the id header), never less.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pgoutbox/config/config.h"
#include "pgoutbox/pgoutput/messages.h"
#include "pgoutbox/relay/change_source.h"
#include "pgoutbox/replication/connection.h"

namespace pgoutbox::relay {

// Which rows of one table, in which order.
struct RowSelection {
  replication::TableName table;
  std::string where;     // an SQL predicate, as configured or given
  std::string order_by;  // a column
  std::uint64_t chunk_rows = 10'000;
  // PostgreSQL cancels each statement that evaluates `where` after this long.
  std::chrono::milliseconds statement_timeout = config::BackfillConfig{}.statement_timeout;
};

// The backfill of a configured table (its backfill.where must be set).
RowSelection backfill_selection(const config::TableConfig& table);

// The slots that say how far a backfill got for `slot`: `pending` exists from before the slot is
// created until every backfilled record is acknowledged, `done` from then on.
struct BackfillMarkers {
  std::string pending;
  std::string done;
};
BackfillMarkers backfill_markers(const std::string& slot);

// A plain SQL connection in one read-only REPEATABLE READ transaction, in `snapshot` when given
// (an exported one), and a server-side cursor over one selection at a time.
class RowReader {
 public:
  RowReader(const config::PostgresConfig& pg, const std::string& snapshot);

  // The message when the selection's predicate could reach past WHERE (...)
  // (config::predicate_problem) or is not a valid query for its table (PREPARE refuses it);
  // nullopt when it is neither.
  std::optional<std::string> explain_error(const RowSelection& selection) const;
  // The matching rows, counted in the reader's snapshot: exactly the rows the cursor returns.
  std::uint64_t count(const RowSelection& selection) const;
  pgoutput::Oid relid(const replication::TableName& table) const;

  void open(const RowSelection& selection);
  // The next chunk of the open cursor; none at the end, which closes the cursor.
  replication::PgResultPtr fetch();

 private:
  replication::PgResultPtr exec_one(const std::string& sql) const;
  void limit(const RowSelection& selection) const;

  replication::Connection conn_;
  mutable std::chrono::milliseconds statement_timeout_{};  // the one in force, for messages
  std::uint64_t chunk_rows_ = 0;
};

struct RowProgress {
  std::string table;            // schema.name
  std::uint64_t read = 0;       // rows read from the cursor
  std::uint64_t published = 0;  // rows whose records Kafka acknowledged (or the poison policy settled)
  std::uint64_t total = 0;      // counted in the same snapshot
};

// The rows of `tables`, one after the other, as a change source for a Relay. `on_progress` is
// called after each chunk read and each chunk acknowledged. Ends stopped when everything is
// acknowledged (finished() then says so) or when stop() was asked.
class RowSource final : public ChangeSource {
 public:
  struct Table {
    RowSelection selection;
    std::uint64_t total = 0;
  };
  RowSource(boost::asio::io_context& io, RowReader& reader, std::vector<Table> tables,
            std::function<void(const RowProgress&)> on_progress);

  void start(ChangeHandler& handler, std::function<void(Outcome)> on_end) override;
  void set_flush(Lsn lsn) override;
  void pause() override { paused_ = true; }
  void resume() override;
  bool paused() const override { return paused_; }
  Lsn received() const override { return received_; }
  void stop() override;

  bool finished() const { return finished_; }

 private:
  struct Chunk {
    std::size_t table;
    Lsn end;
    std::uint64_t rows_through;  // rows of the table read up to the end of this chunk
  };
  void step();
  bool next_chunk();
  void emit(const std::vector<std::byte>& message);
  void end(Outcome outcome);
  void report(std::size_t table);

  boost::asio::io_context& io_;
  RowReader& reader_;
  std::vector<Table> tables_;
  std::vector<RowProgress> progress_;
  std::function<void(const RowProgress&)> on_progress_;
  ChangeHandler* handler_ = nullptr;
  std::function<void(Outcome)> on_end_;

  std::size_t table_ = 0;
  bool cursor_open_ = false;
  bool relation_sent_ = false;
  pgoutput::Oid relid_ = 0;
  replication::PgResultPtr chunk_;
  int row_ = 0;  // the next row of chunk_ to hand over
  std::uint64_t chunks_ = 0;
  std::deque<Chunk> unacknowledged_;
  Lsn received_;
  Lsn flush_;
  bool paused_ = false;
  bool step_posted_ = false;
  bool exhausted_ = false;
  bool finished_ = false;
  bool ended_ = false;
};

}  // namespace pgoutbox::relay
