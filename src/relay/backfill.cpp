#include "pgoutbox/relay/backfill.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <boost/asio/post.hpp>
#include <chrono>
#include <limits>

#include "pgoutbox/config/predicate.h"

namespace pgoutbox::relay {
namespace {

constexpr const char* kCursor = "pgoutbox_rows";

// pgoutput's wire layouts (docs/pgoutput.md §3, proto.c logicalrep_write_*): big-endian
// integers, NUL-terminated strings.
class MessageWriter {
 public:
  explicit MessageWriter(char kind) { int8(static_cast<std::uint8_t>(kind)); }
  MessageWriter& int8(std::uint8_t v) { return big_endian(v, 1); }
  MessageWriter& int16(std::uint16_t v) { return big_endian(v, 2); }
  MessageWriter& int32(std::uint32_t v) { return big_endian(v, 4); }
  MessageWriter& int64(std::uint64_t v) { return big_endian(v, 8); }
  MessageWriter& raw(const char* data, std::size_t size) {
    for (std::size_t i = 0; i < size; ++i) bytes_.push_back(static_cast<std::byte>(data[i]));
    return *this;
  }
  MessageWriter& string(const std::string& s) { return raw(s.data(), s.size()).int8(0); }
  const std::vector<std::byte>& bytes() const { return bytes_; }

 private:
  MessageWriter& big_endian(std::uint64_t v, int width) {
    for (int shift = 8 * (width - 1); shift >= 0; shift -= 8)
      bytes_.push_back(static_cast<std::byte>((v >> shift) & 0xFFU));
    return *this;
  }
  std::vector<std::byte> bytes_;
};

std::uint64_t pg_now() {
  const auto unix_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  return static_cast<std::uint64_t>(unix_us - pgoutput::kPgEpochUnixSeconds * 1'000'000);
}

std::string label_of(const replication::TableName& t) { return t.schema + "." + t.name; }

}  // namespace

RowSelection backfill_selection(const config::TableConfig& table) {
  return RowSelection{{table.schema, table.name},
                      table.backfill.where,
                      table.backfill.order_by.empty() ? table.columns.id : table.backfill.order_by,
                      table.backfill.chunk_rows,
                      table.backfill.statement_timeout};
}

BackfillMarkers backfill_markers(const std::string& slot) {
  return BackfillMarkers{slot + std::string(config::kBackfillingSuffix), slot + std::string(config::kBackfilledSuffix)};
}

RowReader::RowReader(const config::PostgresConfig& pg, const std::string& snapshot)
    : conn_(replication::Connection::open(pg.dsn, false, pg.application_name, pg.password)) {
  conn_.exec("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY");
  if (!snapshot.empty()) conn_.exec("SET TRANSACTION SNAPSHOT " + conn_.literal(snapshot));
  // The predicate is lexed as config::predicate_problem lexes it: a backslash in '...' is a
  // character, whatever the server's default.
  conn_.exec("SET LOCAL standard_conforming_strings = on");
}

// The extended protocol runs one statement: a predicate cannot smuggle in a second one.
replication::PgResultPtr RowReader::exec_one(const std::string& sql) const {
  replication::PgResultPtr res(PQexecParams(conn_.raw(), sql.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0));
  const auto status = PQresultStatus(res.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    std::string message = PQerrorMessage(conn_.raw());
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
    const char* state = PQresultErrorField(res.get(), PG_DIAG_SQLSTATE);
    const std::string sqlstate = state != nullptr ? state : "";
    if (sqlstate == "57014" && statement_timeout_.count() > 0) {
      message += fmt::format(" (tables[].backfill.statement_timeout is {}: raise it, or narrow the predicate)",
                             statement_timeout_);
    }
    throw replication::PgError(message, sqlstate);
  }
  return res;
}

// Every statement that evaluates the predicate, and the cursor's fetches after it, run under the
// selection's statement_timeout (SET LOCAL: until the reader's transaction ends). PostgreSQL
// takes at most INT_MAX milliseconds.
void RowReader::limit(const RowSelection& selection) const {
  const auto ms = std::min<std::int64_t>(selection.statement_timeout.count(), std::numeric_limits<int>::max());
  exec_one(fmt::format("SET LOCAL statement_timeout = {}", ms));
  statement_timeout_ = std::chrono::milliseconds(ms);
}

namespace {
std::string select_sql(const replication::Connection& conn, const RowSelection& s) {
  return fmt::format("SELECT * FROM {} WHERE ({}) ORDER BY {}", s.table.quoted(), s.where, conn.identifier(s.order_by));
}
}  // namespace

// PREPARE parses and analyses the query without planning it, so no function of the predicate
// runs (a plan folds immutable calls): the predicate is one boolean expression over the table's
// columns, or PostgreSQL says why not.
std::optional<std::string> RowReader::explain_error(const RowSelection& selection) const {
  if (auto problem = config::predicate_problem(selection.where); !problem.empty()) return "the predicate " + problem;
  try {
    limit(selection);
    exec_one("PREPARE pgoutbox_predicate AS " + select_sql(conn_, selection));
    exec_one("DEALLOCATE pgoutbox_predicate");
  } catch (const replication::PgError& e) {
    return e.what();
  }
  return std::nullopt;
}

std::uint64_t RowReader::count(const RowSelection& selection) const {
  limit(selection);
  const auto res =
      exec_one(fmt::format("SELECT pg_catalog.count(*) FROM {} WHERE ({})", selection.table.quoted(), selection.where));
  return std::stoull(PQgetvalue(res.get(), 0, 0));
}

pgoutput::Oid RowReader::relid(const replication::TableName& table) const {
  const auto res = exec_one("SELECT " + conn_.literal(table.quoted()) + "::pg_catalog.regclass::pg_catalog.oid");
  return static_cast<pgoutput::Oid>(std::stoul(PQgetvalue(res.get(), 0, 0)));
}

void RowReader::open(const RowSelection& selection) {
  limit(selection);
  exec_one(fmt::format("DECLARE {} NO SCROLL CURSOR FOR {}", kCursor, select_sql(conn_, selection)));
  chunk_rows_ = selection.chunk_rows;
}

replication::PgResultPtr RowReader::fetch() {
  auto res = conn_.exec(fmt::format("FETCH FORWARD {} FROM {}", chunk_rows_, kCursor));
  if (PQntuples(res.get()) == 0) conn_.exec(fmt::format("CLOSE {}", kCursor));
  return res;
}

RowSource::RowSource(boost::asio::io_context& io, RowReader& reader, std::vector<Table> tables,
                     std::function<void(const RowProgress&)> on_progress)
    : io_(io), reader_(reader), tables_(std::move(tables)), on_progress_(std::move(on_progress)) {
  for (const auto& t : tables_) progress_.push_back(RowProgress{label_of(t.selection.table), 0, 0, t.total});
}

void RowSource::start(ChangeHandler& handler, std::function<void(Outcome)> on_end) {
  handler_ = &handler;
  on_end_ = std::move(on_end);
  resume();
}

void RowSource::resume() {
  paused_ = false;
  if (step_posted_ || ended_) return;
  step_posted_ = true;
  boost::asio::post(io_, [this] {
    step_posted_ = false;
    step();
  });
}

void RowSource::set_flush(Lsn lsn) {
  if (lsn <= flush_) return;
  flush_ = lsn;
  while (!unacknowledged_.empty() && unacknowledged_.front().end <= flush_) {
    const auto chunk = unacknowledged_.front();
    unacknowledged_.pop_front();
    progress_[chunk.table].published = chunk.rows_through;
    report(chunk.table);
  }
  if (exhausted_ && unacknowledged_.empty() && !finished_) {
    finished_ = true;
    boost::asio::post(io_, [this] { end(Outcome::stopped()); });
  }
}

void RowSource::stop() {
  boost::asio::post(io_, [this] { end(Outcome::stopped()); });
}

void RowSource::end(Outcome outcome) {
  if (ended_) return;
  ended_ = true;
  on_end_(std::move(outcome));
}

void RowSource::report(std::size_t table) {
  if (on_progress_) on_progress_(progress_[table]);
}

void RowSource::emit(const std::vector<std::byte>& message) {
  replication::XLogData data;
  data.start = received_;
  data.wal_end = received_;
  data.payload = message;
  handler_->on_data(data);
}

// Opens the next table's cursor or fetches the next chunk; false once every table is read.
bool RowSource::next_chunk() {
  while (table_ < tables_.size()) {
    const auto& selection = tables_[table_].selection;
    if (!cursor_open_) {
      reader_.open(selection);
      relid_ = reader_.relid(selection.table);
      cursor_open_ = true;
      relation_sent_ = false;
    }
    chunk_ = reader_.fetch();
    row_ = 0;
    if (PQntuples(chunk_.get()) > 0) return true;
    cursor_open_ = false;
    chunk_.reset();
    if (progress_[table_].published == progress_[table_].read) report(table_);
    ++table_;
  }
  return false;
}

void RowSource::step() {
  if (ended_ || paused_) return;
  try {
    if (!chunk_) {
      if (!next_chunk()) {
        exhausted_ = true;
        if (unacknowledged_.empty() && !finished_) {
          finished_ = true;
          end(Outcome::stopped());
        }
        return;
      }
      const auto& table = tables_[table_].selection.table;
      const PGresult* res = chunk_.get();
      if (!relation_sent_) {
        // Column names and types as the cursor returns them: the mapping resolves them as it
        // resolves the stream's Relation message for the table.
        MessageWriter relation('R');
        relation.int32(relid_).string(table.schema).string(table.name).int8('d');
        relation.int16(static_cast<std::uint16_t>(PQnfields(res)));
        for (int c = 0; c < PQnfields(res); ++c) {
          relation.int8(0)
              .string(PQfname(res, c))
              .int32(PQftype(res, c))
              .int32(static_cast<std::uint32_t>(PQfmod(res, c)));
        }
        emit(relation.bytes());
        relation_sent_ = true;
      }
      // Each chunk is a transaction at positions of its own, 2n+1 and 2n+2: the relay's flush
      // position passing its end means Kafka acknowledged (or the policy settled) all its rows.
      ++chunks_;
      const std::uint64_t final_lsn = 2 * chunks_ - 1;
      received_ = Lsn{final_lsn};
      emit(MessageWriter('B').int64(final_lsn).int64(pg_now()).int32(0).bytes());
    }
    const PGresult* res = chunk_.get();
    const int fields = PQnfields(res);
    for (; row_ < PQntuples(res); ++row_) {
      if (ended_ || paused_) return;
      MessageWriter insert('I');
      insert.int32(relid_).int8('N').int16(static_cast<std::uint16_t>(fields));
      for (int c = 0; c < fields; ++c) {
        if (PQgetisnull(res, row_, c) != 0) {
          insert.int8('n');
          continue;
        }
        const auto size = static_cast<std::size_t>(PQgetlength(res, row_, c));
        insert.int8('t').int32(static_cast<std::uint32_t>(size)).raw(PQgetvalue(res, row_, c), size);
      }
      ++progress_[table_].read;
      emit(insert.bytes());
    }
    if (ended_) return;
    const std::uint64_t end_lsn = 2 * chunks_;
    received_ = Lsn{end_lsn};
    unacknowledged_.push_back(Chunk{table_, Lsn{end_lsn}, progress_[table_].read});
    report(table_);
    chunk_.reset();
    emit(MessageWriter('C').int8(0).int64(end_lsn - 1).int64(end_lsn).int64(pg_now()).bytes());
    handler_->on_caught_up();
  } catch (const replication::PgError& e) {
    end(Outcome::reconnect(fmt::format("reading the rows of {}: {}", progress_[table_].table, e.what())));
    return;
  }
  if (!paused_) resume();
}

}  // namespace pgoutbox::relay
