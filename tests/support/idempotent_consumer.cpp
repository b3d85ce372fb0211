#include "idempotent_consumer.h"

#include <libpq-fe.h>

#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>

#include "kafka_client.h"

namespace pgoutbox::test {
namespace {

struct ConnDeleter {
  void operator()(PGconn* conn) const { PQfinish(conn); }
};
using Conn = std::unique_ptr<PGconn, ConnDeleter>;
struct ResultDeleter {
  void operator()(PGresult* res) const { PQclear(res); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

Conn connect_or_throw(const std::string& dsn) {
  Conn conn(PQconnectdb(dsn.c_str()));
  if (PQstatus(conn.get()) != CONNECTION_OK)
    throw std::runtime_error("consumer: cannot connect: " + std::string(PQerrorMessage(conn.get())));
  return conn;
}

Result exec_params(PGconn* conn, const char* sql, const std::vector<std::string>& params) {
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p.c_str());
  return Result(PQexecParams(conn, sql, static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr, 0));
}

bool ok(const Result& res) {
  const auto status = PQresultStatus(res.get());
  return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

enum class Applied { applied, repeat, failed };

// One record: the consumer_log insert and the business update in ONE statement, so one cannot
// happen without the other; the update runs only when the log row is new. Called inside the
// batch's transaction.
Applied apply_record(PGconn* conn, const std::string& consumer, const ConsumedRecord& record) {
  const Result res = exec_params(conn,
                                 "WITH logged AS (INSERT INTO consumer_log (consumer, msg_id) VALUES ($1, $2) "
                                 "                ON CONFLICT DO NOTHING RETURNING 1) "
                                 "INSERT INTO fault_stock (consumer, sku, quantity, events) "
                                 "SELECT $1, $3, ($4::jsonb->>'qty')::bigint, 1 FROM logged "
                                 "ON CONFLICT (consumer, sku) DO UPDATE SET quantity = fault_stock.quantity + "
                                 "excluded.quantity, events = fault_stock.events + 1",
                                 {consumer, *record.header("id"), *record.key, *record.value});
  if (!ok(res)) return Applied::failed;
  return std::string(PQcmdTuples(res.get())) == "1" ? Applied::applied : Applied::repeat;
}

// A batch of records in one local transaction (each with its own log row and update), as a
// consumer applies what one poll returned; all or nothing.
bool apply_batch(PGconn* conn, const std::string& consumer, const std::vector<ConsumedRecord>& batch,
                 std::uint64_t& applied, std::uint64_t& repeats) {
  if (!ok(Result(PQexec(conn, "BEGIN")))) return false;
  std::uint64_t a = 0, r = 0;
  for (const auto& record : batch) {
    const Applied result = apply_record(conn, consumer, record);
    if (result == Applied::failed) return false;
    (result == Applied::applied ? a : r) += 1;
  }
  if (!ok(Result(PQexec(conn, "COMMIT")))) return false;
  applied = a;
  repeats = r;
  return true;
}

}  // namespace

void install_consumer_tables(const std::string& dsn) {
  Conn conn = connect_or_throw(dsn);
  const std::string ddl = read_file(std::string(PGOUTBOX_SQL_DIR) + "/consumer_log.sql") +
                          "\nCREATE TABLE IF NOT EXISTS fault_stock (consumer varchar(64) NOT NULL, sku text NOT NULL,"
                          " quantity bigint NOT NULL, events bigint NOT NULL, PRIMARY KEY (consumer, sku));";
  if (!ok(Result(PQexec(conn.get(), ddl.c_str())))) {
    throw std::runtime_error("consumer tables: " + std::string(PQerrorMessage(conn.get())));
  }
}

IdempotentConsumer::IdempotentConsumer(Options options) : options_(std::move(options)) {}

IdempotentConsumer::~IdempotentConsumer() { stop(); }

void IdempotentConsumer::start() {
  stop_ = false;
  thread_ = std::thread([this] { loop(); });
}

void IdempotentConsumer::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

IdempotentConsumer::Stats IdempotentConsumer::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void IdempotentConsumer::loop() {
  auto consumer = make_client(RD_KAFKA_CONSUMER, {{"bootstrap.servers", options_.bootstrap},
                                                  {"group.id", options_.group},
                                                  {"enable.auto.commit", "false"},
                                                  {"auto.offset.reset", "earliest"},
                                                  // pgoutbox's exactly-once mode: aborted records unseen
                                                  {"isolation.level", "read_committed"},
                                                  {"topic.metadata.refresh.interval.ms", "2000"},
                                                  // Rejoins quickly after a broker outage: the
                                                  // group waits for a lost member this long.
                                                  {"session.timeout.ms", "6000"},
                                                  {"heartbeat.interval.ms", "1000"},
                                                  // And a rebalance waits for a lost member at
                                                  // most this long (the rebalance timeout;
                                                  // 300 s by default, beyond every test's wait).
                                                  {"max.poll.interval.ms", "60000"},
                                                  {"log_level", "3"}});
  rd_kafka_poll_set_consumer(consumer.get());
  rd_kafka_topic_partition_list_t* subscription =
      rd_kafka_topic_partition_list_new(static_cast<int>(options_.topics.size()));
  for (const auto& t : options_.topics)
    rd_kafka_topic_partition_list_add(subscription, t.c_str(), RD_KAFKA_PARTITION_UA);
  const auto subscribed = rd_kafka_subscribe(consumer.get(), subscription);
  rd_kafka_topic_partition_list_destroy(subscription);
  if (subscribed != RD_KAFKA_RESP_ERR_NO_ERROR) throw std::runtime_error("consumer: subscribe failed");

  Conn conn;
  int since_commit = 0;
  constexpr std::size_t kBatch = 100;
  while (!stop_) {
    // What is there now, up to a batch: the first poll waits a little, the rest do not.
    std::vector<ConsumedRecord> batch;
    for (int timeout = 200; batch.size() < kBatch; timeout = 0) {
      rd_kafka_message_t* msg = rd_kafka_consumer_poll(consumer.get(), timeout);
      if (msg == nullptr) break;
      if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR)
        batch.push_back(to_record(msg));  // else: end of partition, broker down
      rd_kafka_message_destroy(msg);
    }
    if (batch.empty()) continue;
    {
      std::lock_guard lock(mutex_);
      stats_.records += batch.size();
    }
    std::erase_if(batch, [](const ConsumedRecord& r) { return !r.header("id") || !r.key || !r.value; });
    bool done = false;
    std::uint64_t applied = 0, repeats = 0;
    while (!stop_ && !done) {
      if (!conn) {
        conn.reset(PQconnectdb(options_.dsn.c_str()));
        if (PQstatus(conn.get()) != CONNECTION_OK ||
            (!options_.durable_commits && !ok(Result(PQexec(conn.get(), "SET synchronous_commit = off"))))) {
          conn.reset();
        }
      }
      if (conn) done = apply_batch(conn.get(), options_.group, batch, applied, repeats);
      if (done) break;
      conn.reset();
      {
        std::lock_guard lock(mutex_);
        stats_.db_retries += 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!done) break;  // stopping mid-batch: its offsets are not committed
    {
      std::lock_guard lock(mutex_);
      stats_.applied += applied;
      stats_.repeats += repeats;
    }
    since_commit += static_cast<int>(batch.size());
    if (since_commit >= options_.commit_every) {
      rd_kafka_commit(consumer.get(), nullptr, 1);  // async: positions of what was applied
      since_commit = 0;
    }
  }
  rd_kafka_consumer_close(consumer.get());
}

std::size_t consumer_log_count(const std::string& dsn, const std::string& consumer) {
  Conn conn = connect_or_throw(dsn);
  const Result res = exec_params(conn.get(), "SELECT count(*) FROM consumer_log WHERE consumer = $1", {consumer});
  if (!ok(res)) throw std::runtime_error("consumer_log count: " + std::string(PQerrorMessage(conn.get())));
  return std::stoull(PQgetvalue(res.get(), 0, 0));
}

std::string ExactlyOnceReport::summary() const {
  std::ostringstream out;
  out << "events " << events << ", consumer_log rows " << logged << ", missing " << missing << ", foreign " << foreign
      << ", keys " << keys << ", keys with a wrong total " << keys_wrong;
  for (const auto& p : problems) out << "\n  " << p;
  return out.str();
}

ExactlyOnceReport check_exactly_once(const std::string& dsn, const std::string& consumer,
                                     const std::vector<CommittedEvent>& committed) {
  ExactlyOnceReport report;
  report.events = committed.size();
  Conn conn = connect_or_throw(dsn);
  const auto note = [&](const std::string& text) {
    if (report.problems.size() < 20) report.problems.push_back(text);
  };

  std::set<std::string> logged;
  const Result ids = exec_params(conn.get(), "SELECT msg_id FROM consumer_log WHERE consumer = $1", {consumer});
  if (!ok(ids)) throw std::runtime_error("consumer_log read: " + std::string(PQerrorMessage(conn.get())));
  for (int r = 0; r < PQntuples(ids.get()); ++r) logged.insert(PQgetvalue(ids.get(), r, 0));
  report.logged = logged.size();

  std::set<std::string> ids_committed;
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> expected;  // sku → (quantity, events)
  for (const auto& ev : committed) {
    ids_committed.insert(ev.id);
    auto& [quantity, events] = expected[ev.key];
    quantity += ev.qty;
    events += 1;
    if (logged.count(ev.id) == 0) {
      report.missing += 1;
      note("not applied: " + ev.id);
    }
  }
  for (const auto& id : logged) {
    if (ids_committed.count(id) == 0) {
      report.foreign += 1;
      note("applied but never committed: " + id);
    }
  }

  std::map<std::string, std::pair<std::int64_t, std::int64_t>> actual;
  const Result stock =
      exec_params(conn.get(), "SELECT sku, quantity, events FROM fault_stock WHERE consumer = $1", {consumer});
  if (!ok(stock)) throw std::runtime_error("fault_stock read: " + std::string(PQerrorMessage(conn.get())));
  for (int r = 0; r < PQntuples(stock.get()); ++r) {
    actual[PQgetvalue(stock.get(), r, 0)] = {std::stoll(PQgetvalue(stock.get(), r, 1)),
                                             std::stoll(PQgetvalue(stock.get(), r, 2))};
  }
  report.keys = expected.size();
  for (const auto& [sku, want] : expected) {
    const auto it = actual.find(sku);
    const auto got = it == actual.end() ? std::pair<std::int64_t, std::int64_t>{0, 0} : it->second;
    if (got != want) {
      report.keys_wrong += 1;
      note("key " + sku + ": quantity " + std::to_string(got.first) + " from " + std::to_string(got.second) +
           " events, expected " + std::to_string(want.first) + " from " + std::to_string(want.second));
    }
  }
  for (const auto& [sku, got] : actual) {
    if (expected.count(sku) == 0) {
      report.keys_wrong += 1;
      note("key " + sku + " was never written");
    }
  }
  return report;
}

}  // namespace pgoutbox::test
