#include "load_writer.h"

#include <libpq-fe.h>

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>

namespace pgoutbox::test {
namespace {

using Clock = std::chrono::steady_clock;

struct ConnDeleter {
  void operator()(PGconn* conn) const { PQfinish(conn); }
};
using Conn = std::unique_ptr<PGconn, ConnDeleter>;

struct ResultDeleter {
  void operator()(PGresult* res) const { PQclear(res); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

Conn connect(const std::string& dsn) {
  Conn conn(PQconnectdb(dsn.c_str()));
  if (PQstatus(conn.get()) != CONNECTION_OK) return nullptr;
  return conn;
}

// True when the statement succeeded.
bool run(PGconn* conn, const std::string& sql) {
  Result res(PQexec(conn, sql.c_str()));
  const auto status = PQresultStatus(res.get());
  return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
}

std::string random_hex(std::mt19937_64& rng, std::size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(n, '0');
  for (auto& c : out) c = kDigits[rng() & 15U];
  return out;
}

// One transaction as built before it is tried; it is retried unchanged until it commits (a
// rolled-back one is tried once).
struct Pending {
  std::vector<std::string> statements;  // between BEGIN and COMMIT (or ROLLBACK)
  bool rollback = false;
  std::vector<CommittedEvent> events;  // the rows it keeps when it commits
  std::uint64_t payload_bytes = 0;
  std::map<std::string, std::int64_t> next_seq;  // the key sequence after this commit
};

}  // namespace

void create_outbox_table(const std::string& dsn, const std::string& table) {
  Conn conn = connect(dsn);
  if (!conn) throw std::runtime_error("create_outbox_table: cannot connect");
  const std::string sql = "CREATE TABLE IF NOT EXISTS " + table +
                          " (id text PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL,"
                          "  type text NOT NULL, payload jsonb)";
  if (!run(conn.get(), sql))
    throw std::runtime_error("create_outbox_table: " + std::string(PQerrorMessage(conn.get())));
}

LoadWriter::LoadWriter(Options options) : options_(std::move(options)) {
  if (options_.aggregate_types.empty()) throw std::invalid_argument("LoadWriter: no aggregate types");
}

LoadWriter::~LoadWriter() { stop(); }

void LoadWriter::start() {
  stop_ = false;
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this, i] { run_thread(i); });
}

void LoadWriter::stop() {
  stop_ = true;
  for (auto& t : threads_) t.join();
  threads_.clear();
}

std::vector<CommittedEvent> LoadWriter::committed() const {
  std::lock_guard lock(mutex_);
  return committed_;
}

std::uint64_t LoadWriter::committed_count() const {
  std::lock_guard lock(mutex_);
  return committed_.size();
}

LoadWriter::Stats LoadWriter::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void LoadWriter::run_thread(int index) {
  std::mt19937_64 rng(options_.seed != 0 ? options_.seed + static_cast<std::uint64_t>(index)
                                         : std::random_device{}() ^ static_cast<std::uint64_t>(index));
  const std::string thread_tag = options_.id_prefix + "-w" + std::to_string(index);
  std::map<std::string, std::int64_t> seq_of_key;
  std::uint64_t counter = 0;
  Conn conn;

  const auto percent = [&](int pct) { return pct > 0 && static_cast<int>(rng() % 100) < pct; };

  // One row's VALUES tuple; a kept row is also recorded in `p` (with the next seq of its key).
  const auto make_row = [&](Pending& p, bool keep, bool oversized) {
    const auto key_index = static_cast<std::size_t>(rng() % static_cast<std::uint64_t>(options_.keys_per_thread));
    CommittedEvent ev;
    ev.id = thread_tag + (keep ? "-" : "-x") + std::to_string(++counter);
    ev.key = thread_tag + "-k" + std::to_string(key_index);
    const auto& type = options_.aggregate_types[key_index % options_.aggregate_types.size()];
    ev.topic = options_.topic_prefix + type;
    ev.seq = keep ? ++p.next_seq[ev.key] : 0;
    ev.qty = static_cast<std::int64_t>(rng() % 9) + 1;
    ev.oversized = oversized;
    const std::string payload = "{\"key\": \"" + ev.key + "\", \"seq\": " + std::to_string(ev.seq) +
                                ", \"qty\": " + std::to_string(ev.qty) + ", \"pad\": \"" +
                                random_hex(rng, oversized ? options_.oversized_bytes : options_.payload_bytes) + "\"}";
    std::string tuple = "('" + ev.id + "', '" + type + "', '" + ev.key + "', 'Created', '" + payload + "')";
    if (keep) {
      p.payload_bytes += payload.size();
      p.events.push_back(std::move(ev));
    }
    return tuple;
  };
  const auto insert_of = [&](Pending& p, int rows, bool keep, int oversized_at) {
    std::string sql = "INSERT INTO " + options_.table + " (id, aggregatetype, aggregateid, type, payload) VALUES ";
    for (int r = 0; r < rows; ++r) {
      if (r > 0) sql += ", ";
      sql += make_row(p, keep, r == oversized_at);
    }
    return sql;
  };

  const auto build = [&] {
    Pending p;
    p.next_seq = seq_of_key;
    p.rollback = percent(options_.rollback_percent);
    const int rows =
        percent(options_.big_transaction_percent) ? options_.big_transaction_rows : options_.rows_per_transaction;
    const int oversized_at =
        percent(options_.oversized_percent) ? static_cast<int>(rng() % static_cast<std::uint64_t>(rows)) : -1;
    const bool savepoint = !p.rollback && rows >= 2 && percent(options_.savepoint_percent);
    const int first = savepoint ? 1 + static_cast<int>(rng() % static_cast<std::uint64_t>(rows - 1)) : rows;
    p.statements.push_back(insert_of(p, first, !p.rollback, oversized_at));
    if (savepoint) {
      p.statements.emplace_back("SAVEPOINT discarded");
      p.statements.push_back(insert_of(p, 1 + static_cast<int>(rng() % 3), false, -1));
      p.statements.emplace_back("ROLLBACK TO SAVEPOINT discarded");
      p.statements.push_back(insert_of(p, rows - first, true, oversized_at - first));
    }
    return p;
  };

  // Whether the transaction's rows exist: asked on a fresh connection after a cut-off COMMIT.
  const auto committed_already = [&](const Pending& p) -> std::optional<bool> {
    Result res(
        PQexec(conn.get(), ("SELECT 1 FROM " + options_.table + " WHERE id = '" + p.events.front().id + "'").c_str()));
    if (PQresultStatus(res.get()) != PGRES_TUPLES_OK) return std::nullopt;
    return PQntuples(res.get()) > 0;
  };

  const auto record = [&](Pending& p, Clock::duration latency, bool unsure) {
    seq_of_key = std::move(p.next_seq);
    std::lock_guard lock(mutex_);
    stats_.transactions += 1;
    stats_.events += p.events.size();
    stats_.payload_bytes += p.payload_bytes;
    if (unsure) stats_.unsure_commits += 1;
    stats_.max_commit_latency =
        std::max(stats_.max_commit_latency, std::chrono::duration_cast<std::chrono::milliseconds>(latency));
    for (auto& ev : p.events) committed_.push_back(std::move(ev));
  };

  const auto failed = [&] {
    conn.reset();
    std::lock_guard lock(mutex_);
    stats_.failed_attempts += 1;
  };

  while (!stop_) {
    Pending p = build();
    bool commit_unsure = false;
    // The transaction is retried until it commits, also after stop() (then for at most 60 s, so
    // a test whose Postgres stays down still ends).
    const auto give_up_at = [&] { return stop_ ? Clock::now() + std::chrono::seconds(60) : Clock::time_point::max(); };
    auto deadline = give_up_at();
    for (;;) {
      if (stop_ && deadline == Clock::time_point::max()) deadline = give_up_at();
      if (Clock::now() > deadline) return;
      if (!conn) {
        conn = connect(options_.dsn);
        if (!conn) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          continue;
        }
      }
      if (commit_unsure) {
        const auto exists = committed_already(p);
        if (!exists) {
          failed();
          continue;
        }
        if (*exists) {
          record(p, Clock::duration::zero(), true);
          break;
        }
        commit_unsure = false;  // it did not commit: try it again
      }
      const auto begun = Clock::now();
      bool ran = run(conn.get(), "BEGIN");
      for (const auto& statement : p.statements) ran = ran && run(conn.get(), statement);
      if (!ran) {
        failed();
        if (p.rollback) break;
        continue;
      }
      if (p.rollback) {
        if (!run(conn.get(), "ROLLBACK")) failed();
        std::lock_guard lock(mutex_);
        stats_.rolled_back += 1;
        break;
      }
      if (!run(conn.get(), "COMMIT")) {
        commit_unsure = true;
        failed();
        continue;
      }
      record(p, Clock::now() - begun, false);
      break;
    }
    std::this_thread::sleep_for(options_.pause);
  }
}

}  // namespace pgoutbox::test
