// The replication connection, stream loop and decoder against a real PostgreSQL 15.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <set>
#include <thread>

#include "collector.h"
#include "eventually.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;
using replication::Connection;
using replication::PgError;
using replication::StartOptions;
using replication::StreamEnd;
using replication::TableName;

// A fresh slot + publication over the given tables; names are unique per test.
struct Outbox {
  std::string slot;
  std::string publication;

  StartOptions start(Lsn from = {}) const {
    StartOptions o;
    o.slot = slot;
    o.publications = {publication};
    o.start = from;
    o.proto_version = 1;
    return o;
  }
};

class StreamTest : public ::testing::Test {
 protected:
  PgCluster& pg = shared_postgres();

  Outbox make_outbox(const std::string& name, const std::vector<std::string>& create_sql,
                     const std::vector<TableName>& tables) {
    for (const auto& sql : create_sql) pg.exec(sql);
    auto conn = Connection::open(pg.dsn(), true, "pgoutbox-test-setup");
    conn.create_publication(name + "_pub", tables);
    conn.create_slot(name + "_slot");
    slots_.push_back(name + "_slot");
    return Outbox{name + "_slot", name + "_pub"};
  }

  void TearDown() override {
    for (const auto& slot : slots_) pg.drop_slot_when_free(slot);
  }

  std::vector<std::string> slots_;
};

TEST_F(StreamTest, IdentifiesTheSystemAndChoosesTheProtocolFromTheServerVersion) {
  auto conn = Connection::open(pg.dsn(), true, "pgoutbox-test");
  const auto id = conn.identify_system();
  EXPECT_FALSE(id.system_id.empty());
  EXPECT_EQ(id.timeline, 1);
  EXPECT_FALSE(id.xlogpos.is_zero());
  EXPECT_EQ(id.dbname, "postgres");
  EXPECT_EQ(conn.server_version() / 10000, 15);
  EXPECT_EQ(conn.max_proto_version(), 3);
}

TEST_F(StreamTest, EveryOutboxColumnTypeArrivesAsItsTextForm) {
  const auto box = make_outbox("types",
                               {"CREATE TABLE types_outbox (id uuid PRIMARY KEY, seq bigint, aggregatetype text, "
                                "payload_json json, payload_jsonb jsonb, payload_bytes bytea, created timestamptz, "
                                "maybe text)"},
                               {{"public", "types_outbox"}});
  Session s(pg.dsn(), box.start());
  const std::string big(1 << 20, 'x');
  pg.exec(
      "INSERT INTO types_outbox VALUES ('6f1c2a4e-9b7d-4c1e-8f00-0123456789ab', 9223372036854775807, "
      "'Ördér-訂單', '{\"b\": 1,  \"a\": [true, null]}', '{\"b\": 1,  \"a\": [true, null]}', '\\x00ff10', "
      "'2026-11-29 10:00:00.123456+02', NULL)");
  pg.exec(
      "INSERT INTO types_outbox (id, payload_json) VALUES ('00000000-0000-0000-0000-000000000001', "
      "json_build_object('big', '" +
      big + "'))");
  ASSERT_TRUE(s.run_until([&] { return s.collector.txns.size() >= 2; }, 30s));
  ASSERT_TRUE(s.collector.errors.empty()) << s.collector.errors.front();

  const auto& row = s.collector.txns[0].rows.at(0);
  EXPECT_EQ(row.table, "types_outbox");
  EXPECT_EQ(row.schema, "public");
  EXPECT_EQ(row.value("id"), "6f1c2a4e-9b7d-4c1e-8f00-0123456789ab");
  EXPECT_EQ(row.value("seq"), "9223372036854775807");
  EXPECT_EQ(row.value("aggregatetype"), "Ördér-訂單");
  EXPECT_EQ(row.value("payload_json"), "{\"b\": 1,  \"a\": [true, null]}");  // json keeps its text
  EXPECT_EQ(row.value("payload_jsonb"), "{\"a\": [true, null], \"b\": 1}");  // jsonb is normalised
  EXPECT_EQ(row.value("payload_bytes"), "\\x00ff10");                        // bytea text is hex
  EXPECT_EQ(row.value("created"), "2026-11-29 08:00:00.123456+00");          // the session is UTC, ISO
  EXPECT_EQ(row.value("maybe"), std::nullopt);
  for (const auto kind : row.kinds) EXPECT_NE(kind, pgoutput::ColumnKind::binary);

  const auto& large = s.collector.txns[1].rows.at(0);
  ASSERT_TRUE(large.value("payload_json"));
  EXPECT_EQ(large.value("payload_json"), "{\"big\" : \"" + big + "\"}");  // as json_build_object prints it
  EXPECT_EQ(large.value("payload_bytes"), std::nullopt);
}

TEST_F(StreamTest, AHundredThousandRowTransactionArrivesWholeAndInOrder) {
  const auto box = make_outbox("bulk", {"CREATE TABLE bulk_outbox (id bigint PRIMARY KEY, payload text)"},
                               {{"public", "bulk_outbox"}});
  Session s(pg.dsn(), box.start());
  pg.exec("INSERT INTO bulk_outbox SELECT g, 'event-' || g FROM generate_series(1, 100000) g");
  ASSERT_TRUE(s.run_until([&] { return !s.collector.txns.empty(); }, 120s));
  ASSERT_TRUE(s.collector.errors.empty()) << s.collector.errors.front();
  ASSERT_EQ(s.collector.txns.size(), 1U);
  const auto& rows = s.collector.txns[0].rows;
  ASSERT_EQ(rows.size(), 100000U);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].values[0], std::to_string(i + 1));
  }
  EXPECT_EQ(rows.back().values[1], "event-100000");
}

TEST_F(StreamTest, ConcurrentSmallTransactionsArriveEachWholeInCommitOrder) {
  const auto box = make_outbox("conc", {"CREATE TABLE conc_outbox (id bigserial PRIMARY KEY, writer int, n int)"},
                               {{"public", "conc_outbox"}});
  Session s(pg.dsn(), box.start());
  constexpr int kWriters = 8;
  constexpr int kTxnsEach = 100;
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      auto conn = pg.connect();
      for (int i = 0; i < kTxnsEach; ++i) {
        exec_on(conn.get(), "BEGIN; INSERT INTO conc_outbox (writer, n) VALUES (" + std::to_string(w) + ", " +
                                std::to_string(i) + "), (" + std::to_string(w) + ", " + std::to_string(i) +
                                "); COMMIT");
      }
    });
  }
  for (auto& t : writers) t.join();
  ASSERT_TRUE(s.run_until([&] { return s.collector.txns.size() >= kWriters * kTxnsEach; }, 60s));
  ASSERT_TRUE(s.collector.errors.empty()) << s.collector.errors.front();
  ASSERT_EQ(s.collector.txns.size(), static_cast<std::size_t>(kWriters * kTxnsEach));
  std::set<std::pair<std::string, std::string>> seen;
  Lsn previous;
  std::vector<int> last_n(kWriters, -1);
  for (const auto& txn : s.collector.txns) {
    EXPECT_GT(txn.commit_lsn, previous) << "transactions out of commit order";
    previous = txn.commit_lsn;
    ASSERT_EQ(txn.rows.size(), 2U);
    EXPECT_EQ(txn.rows[0].value("writer"), txn.rows[1].value("writer"));
    EXPECT_EQ(txn.rows[0].value("n"), txn.rows[1].value("n"));
    const int writer = std::stoi(*txn.rows[0].value("writer"));
    const int n = std::stoi(*txn.rows[0].value("n"));
    EXPECT_EQ(n, last_n[writer] + 1) << "a writer's transactions out of its own order";
    last_n[writer] = n;
    seen.emplace(*txn.rows[0].value("writer"), *txn.rows[0].value("n"));
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(kWriters * kTxnsEach));
}

TEST_F(StreamTest, RolledBackTransactionsAndSavepointsPublishNothing) {
  const auto box = make_outbox("rb", {"CREATE TABLE rb_outbox (id text PRIMARY KEY)"}, {{"public", "rb_outbox"}});
  Session s(pg.dsn(), box.start());
  pg.exec("INSERT INTO rb_outbox VALUES ('a')");
  pg.exec("BEGIN; INSERT INTO rb_outbox VALUES ('phantom-1'); ROLLBACK");
  pg.exec(
      "BEGIN; INSERT INTO rb_outbox VALUES ('c'); SAVEPOINT s1; INSERT INTO rb_outbox VALUES ('phantom-2'); "
      "ROLLBACK TO s1; INSERT INTO rb_outbox VALUES ('e'); COMMIT");
  pg.exec("INSERT INTO rb_outbox VALUES ('f')");
  ASSERT_TRUE(s.run_until([&] { return s.collector.txns.size() >= 3; }, 30s));
  // Let anything else that might come arrive: the marker row 'f' is after the phantoms.
  std::vector<std::string> ids;
  for (const auto& t : s.collector.txns) {
    for (const auto& r : t.rows) ids.push_back(*r.values[0]);
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "c", "e", "f"}));
  EXPECT_EQ(s.collector.rows_seen, 4U);
}

TEST_F(StreamTest, ANewRelationMessageDescribesRowsAfterAddColumn) {
  const auto box =
      make_outbox("ddl", {"CREATE TABLE ddl_outbox (id int PRIMARY KEY, payload text)"}, {{"public", "ddl_outbox"}});
  Session s(pg.dsn(), box.start());
  pg.exec("INSERT INTO ddl_outbox VALUES (1, 'before')");
  pg.exec("ALTER TABLE ddl_outbox ADD COLUMN type text DEFAULT 'created'");
  pg.exec("INSERT INTO ddl_outbox VALUES (2, 'after', 'updated')");
  ASSERT_TRUE(s.run_until([&] { return s.collector.txns.size() >= 2; }, 30s));
  ASSERT_TRUE(s.collector.errors.empty()) << s.collector.errors.front();
  const auto& before = s.collector.txns[0].rows.at(0);
  const auto& after = s.collector.txns[1].rows.at(0);
  EXPECT_EQ(before.columns, (std::vector<std::string>{"id", "payload"}));
  EXPECT_EQ(after.columns, (std::vector<std::string>{"id", "payload", "type"}));
  EXPECT_EQ(after.value("type"), "updated");
  EXPECT_GT(after.relation_generation, before.relation_generation);
  EXPECT_GE(s.collector.relation_messages, 2U);
}

TEST_F(StreamTest, TwoOutboxTablesInOnePublicationKeepTheirOwnRows) {
  const auto box = make_outbox("two",
                               {"CREATE SCHEMA billing", "CREATE TABLE two_orders (id int, payload text)",
                                "CREATE TABLE billing.\"Invoice Events\" (id int, body jsonb)"},
                               {{"public", "two_orders"}, {"billing", "Invoice Events"}});
  Session s(pg.dsn(), box.start());
  pg.exec(
      "BEGIN; INSERT INTO two_orders VALUES (1, 'o'); INSERT INTO billing.\"Invoice Events\" VALUES (2, '{}'); "
      "INSERT INTO two_orders VALUES (3, 'p'); COMMIT");
  ASSERT_TRUE(s.run_until([&] { return !s.collector.txns.empty(); }, 30s));
  const auto& rows = s.collector.txns[0].rows;
  ASSERT_EQ(rows.size(), 3U);
  EXPECT_EQ(rows[0].table, "two_orders");
  EXPECT_EQ(rows[1].schema, "billing");
  EXPECT_EQ(rows[1].table, "Invoice Events");
  EXPECT_EQ(rows[1].value("body"), "{}");
  EXPECT_EQ(rows[2].value("id"), "3");
}

TEST_F(StreamTest, APartitionedOutboxArrivesUnderItsRoot) {
  const auto box = make_outbox(
      "part",
      {"CREATE TABLE part_outbox (id int, created date, payload text) PARTITION BY RANGE (created)",
       "CREATE TABLE part_outbox_2026 PARTITION OF part_outbox FOR VALUES FROM ('2026-01-01') TO ('2027-01-01')",
       "CREATE TABLE part_outbox_2027 PARTITION OF part_outbox FOR VALUES FROM ('2027-01-01') TO ('2028-01-01')"},
      {{"public", "part_outbox"}});
  auto conn = Connection::open(pg.dsn(), false, "pgoutbox-test");
  const auto pub = conn.publication(box.publication);
  ASSERT_TRUE(pub);
  EXPECT_TRUE(pub->via_root);
  EXPECT_FALSE(replication::check_publication_covers(conn, box.publication, {{"public", "part_outbox"}}));

  Session s(pg.dsn(), box.start());
  pg.exec("INSERT INTO part_outbox VALUES (1, '2026-06-01', 'a'), (2, '2027-06-01', 'b')");
  ASSERT_TRUE(s.run_until([&] { return !s.collector.txns.empty(); }, 30s));
  const auto& rows = s.collector.txns[0].rows;
  ASSERT_EQ(rows.size(), 2U);
  EXPECT_EQ(rows[0].table, "part_outbox");
  EXPECT_EQ(rows[1].table, "part_outbox");
  EXPECT_EQ(rows[0].relid, rows[1].relid);
}

TEST_F(StreamTest, LogicalDecodingMessagesArriveInTheirTransactionOrAlone) {
  const auto box = make_outbox("msg", {"CREATE TABLE msg_outbox (id int)"}, {{"public", "msg_outbox"}});
  Session s(pg.dsn(), box.start());
  pg.exec(
      "BEGIN; INSERT INTO msg_outbox VALUES (1); "
      "SELECT pg_logical_emit_message(true, 'pgoutbox', convert_to('{\"event\": \"été\"}', 'UTF8')); COMMIT");
  pg.exec("SELECT pg_logical_emit_message(false, 'heartbeat', 'tick')");
  pg.exec("BEGIN; SELECT pg_logical_emit_message(true, 'rolled-back', 'never'); ROLLBACK");
  pg.exec("INSERT INTO msg_outbox VALUES (2)");
  ASSERT_TRUE(
      s.run_until([&] { return s.collector.txns.size() >= 2 && !s.collector.standalone_messages.empty(); }, 30s));
  ASSERT_TRUE(s.collector.errors.empty()) << s.collector.errors.front();
  ASSERT_EQ(s.collector.txns[0].messages.size(), 1U);
  EXPECT_EQ(s.collector.txns[0].messages[0].prefix, "pgoutbox");
  EXPECT_EQ(s.collector.txns[0].messages[0].content, "{\"event\": \"été\"}");
  EXPECT_TRUE(s.collector.txns[0].messages[0].transactional);
  EXPECT_EQ(s.collector.standalone_messages.at(0).prefix, "heartbeat");
  EXPECT_EQ(s.collector.standalone_messages.at(0).content, "tick");
  EXPECT_TRUE(s.collector.txns[1].messages.empty());
  EXPECT_EQ(s.collector.txns.size(), 2U);
}

TEST_F(StreamTest, RestartResumesFromTheConfirmedPositionWithWholeTransactions) {
  const auto box = make_outbox("restart", {"CREATE TABLE restart_outbox (id int)"}, {{"public", "restart_outbox"}});
  Lsn confirmed;
  {
    Session s(pg.dsn(), box.start());
    for (int i = 1; i <= 3; ++i) pg.exec("INSERT INTO restart_outbox VALUES (" + std::to_string(i) + ")");
    ASSERT_TRUE(s.run_until([&] { return s.collector.txns.size() >= 3; }, 30s));
    // Only the first two are "durably handled"; the third was merely received.
    confirmed = s.collector.txns[1].end_lsn;
    s.stream->set_flush(confirmed);
    s.stream->set_flush(s.collector.txns[0].end_lsn);  // a lower value is ignored
    s.stop_and_wait();
    EXPECT_EQ(s.ended->reason, StreamEnd::Reason::stopped) << s.ended->message;
  }
  EXPECT_EQ(pg.query_value("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '" + box.slot + "'"),
            confirmed.to_string());
  pg.exec("BEGIN; INSERT INTO restart_outbox VALUES (4); INSERT INTO restart_outbox VALUES (5); COMMIT");

  PGOUTBOX_ASSERT_EVENTUALLY(
      pg.query_value("SELECT active FROM pg_replication_slots WHERE slot_name = '" + box.slot + "'") == "f", 10s);
  Session again(pg.dsn(), box.start());
  ASSERT_TRUE(again.run_until([&] { return again.collector.txns.size() >= 2; }, 30s));
  std::vector<std::vector<std::string>> got;
  for (const auto& t : again.collector.txns) {
    auto& ids = got.emplace_back();
    for (const auto& r : t.rows) ids.push_back(*r.values[0]);
  }
  EXPECT_EQ(got, (std::vector<std::vector<std::string>>{{"3"}, {"4", "5"}}));
}

TEST_F(StreamTest, FlushPositionReachesTheSlotAndNeverGoesBack) {
  const auto box = make_outbox("flush", {"CREATE TABLE flush_outbox (id int)"}, {{"public", "flush_outbox"}});
  Session s(pg.dsn(), box.start(), {.status_interval = 200ms});
  pg.exec("INSERT INTO flush_outbox VALUES (1)");
  pg.exec("INSERT INTO flush_outbox VALUES (2)");
  ASSERT_TRUE(s.run_until([&] { return s.collector.txns.size() >= 2; }, 30s));
  const auto slot_confirmed = [&] {
    return Lsn::parse(
        *pg.query_value("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '" + box.slot + "'"));
  };
  const Lsn initial = *slot_confirmed();
  EXPECT_LT(initial, s.collector.txns[0].end_lsn) << "the stream confirmed what nobody handed it";
  s.stream->set_flush(s.collector.txns[1].end_lsn);
  ASSERT_TRUE(s.run_until([&] { return slot_confirmed() == s.collector.txns[1].end_lsn; }, 10s));
  s.stream->set_flush(s.collector.txns[0].end_lsn);
  s.run_until([] { return false; }, 600ms);
  EXPECT_EQ(slot_confirmed(), s.collector.txns[1].end_lsn);
  EXPECT_EQ(s.stream->flushed(), s.collector.txns[1].end_lsn);
}

class KeepaliveTest : public StreamTest {
 protected:
  void SetUp() override {
    pg.exec("ALTER SYSTEM SET wal_sender_timeout = '2s'");
    pg.exec("SELECT pg_reload_conf()");
    PGOUTBOX_ASSERT_EVENTUALLY(pg.query_value("SHOW wal_sender_timeout") == "2s", 5s);
  }
  void TearDown() override {
    pg.exec("ALTER SYSTEM RESET wal_sender_timeout");
    pg.exec("SELECT pg_reload_conf()");
    StreamTest::TearDown();
  }
};

TEST_F(KeepaliveTest, AnIdleConnectionOutlivesSeveralSenderTimeouts) {
  const auto box = make_outbox("idle", {"CREATE TABLE idle_outbox (id int)"}, {{"public", "idle_outbox"}});
  // A status interval far beyond the timeout: only answering the server's keepalive requests
  // keeps this connection alive.
  Session s(pg.dsn(), box.start(), {.status_interval = 60s});
  s.run_until([] { return false; }, 8s);
  ASSERT_FALSE(s.ended) << s.ended->message;
  EXPECT_GE(s.collector.keepalives.size(), 2U);
  pg.exec("INSERT INTO idle_outbox VALUES (1)");
  EXPECT_TRUE(s.run_until([&] { return !s.collector.txns.empty(); }, 10s));
}

// Freezes the walsender serving `slot` (SIGSTOP): each backend is its own process group, so
// stopping the postmaster's group would leave it running.
pid_t freeze_walsender(PgCluster& pg, const std::string& slot) {
  const auto pid = pg.query_value("SELECT active_pid FROM pg_replication_slots WHERE slot_name = '" + slot + "'");
  if (!pid) throw std::runtime_error("slot " + slot + " is not active");
  const pid_t p = static_cast<pid_t>(std::stoi(*pid));
  ::kill(p, SIGSTOP);
  return p;
}

TEST_F(KeepaliveTest, AFrozenServerEndsTheStreamWithinTwiceTheSenderTimeout) {
  const auto box = make_outbox("frozen", {"CREATE TABLE frozen_outbox (id int)"}, {{"public", "frozen_outbox"}});
  Session s(pg.dsn(), box.start());
  EXPECT_EQ(s.connection.wal_sender_timeout(), 2s) << "read from the server at START_REPLICATION";
  s.run_until([] { return false; }, 500ms);
  ASSERT_FALSE(s.ended) << s.ended->message;
  const pid_t walsender = freeze_walsender(pg, box.slot);
  const auto frozen_at = std::chrono::steady_clock::now();
  const bool ended = s.run_until([&] { return s.ended.has_value(); }, 20s);
  const auto after = std::chrono::steady_clock::now() - frozen_at;
  ::kill(walsender, SIGCONT);
  ASSERT_TRUE(ended) << "the stream waited forever on a frozen server";
  EXPECT_EQ(s.ended->reason, StreamEnd::Reason::timeout) << s.ended->message;
  EXPECT_NE(s.ended->message.find("no message or keepalive"), std::string::npos) << s.ended->message;
  EXPECT_GE(after, 3s);
  EXPECT_LT(after, 10s);
}

TEST_F(KeepaliveTest, AFullyConfirmedIdleStreamIsNotTakenForDead) {
  const auto box = make_outbox("quiet", {"CREATE TABLE quiet_outbox (id int)"}, {{"public", "quiet_outbox"}});
  // Frequent status updates: the server never needs to ask for one, so only the stream's own
  // ping at half the timeout brings a message.
  Session s(pg.dsn(), box.start(), {.status_interval = 300ms});
  // Confirming every keepalive's position leaves the walsender nothing to report.
  s.run_until(
      [&] {
        if (!s.collector.keepalives.empty()) s.stream->set_flush(s.collector.keepalives.back());
        return false;
      },
      10s);
  ASSERT_FALSE(s.ended) << s.ended->message;
}

TEST_F(KeepaliveTest, StopHasADeadlineWhenTheServerNeverEndsTheCopy) {
  const auto box = make_outbox("stuck", {"CREATE TABLE stuck_outbox (id int)"}, {{"public", "stuck_outbox"}});
  Session s(pg.dsn(), box.start(), {.status_interval = 10s});
  s.stream->set_stop_timeout(1s);
  s.run_until([] { return false; }, 300ms);
  const pid_t walsender = freeze_walsender(pg, box.slot);
  s.stream->stop();
  const bool ended = s.run_until([&] { return s.ended.has_value(); }, 10s);
  ::kill(walsender, SIGCONT);
  ASSERT_TRUE(ended) << "stop() waited forever for the server";
  EXPECT_EQ(s.ended->reason, StreamEnd::Reason::timeout) << s.ended->message;
}

TEST_F(KeepaliveTest, APausedStreamStaysConnectedAndDeliversAfterResume) {
  const auto box =
      make_outbox("paused", {"CREATE TABLE paused_outbox (id int, pad text)"}, {{"public", "paused_outbox"}});
  Session s(pg.dsn(), box.start(), {.status_interval = 500ms});
  s.stream->pause();
  // More than the socket buffers hold, so the walsender blocks on sending to us.
  pg.exec("INSERT INTO paused_outbox SELECT g, repeat('x', 1000) FROM generate_series(1, 20000) g");
  s.run_until([] { return false; }, 7s);
  ASSERT_FALSE(s.ended) << s.ended->message;
  EXPECT_EQ(s.collector.rows_seen, 0U);
  s.stream->resume();
  ASSERT_TRUE(s.run_until([&] { return !s.collector.txns.empty(); }, 60s));
  EXPECT_EQ(s.collector.txns[0].rows.size(), 20000U);
}

TEST_F(StreamTest, ABusySlotIsReportedWithItsSqlState) {
  const auto box = make_outbox("busy", {"CREATE TABLE busy_outbox (id int)"}, {{"public", "busy_outbox"}});
  Session first(pg.dsn(), box.start());
  first.run_until([] { return false; }, 200ms);
  try {
    Session second(pg.dsn(), box.start());
    FAIL() << "a second session started on an active slot";
  } catch (const PgError& e) {
    EXPECT_EQ(e.sqlstate(), "55006") << e.what();
    EXPECT_NE(std::string(e.what()).find("is active for PID"), std::string::npos) << e.what();
  }
}

TEST_F(StreamTest, PublicationChecksNameWhatIsMissingAndTheFix) {
  pg.exec("CREATE TABLE chk_a (id int); CREATE TABLE chk_b (id int)");
  auto conn = Connection::open(pg.dsn(), true, "pgoutbox-test");
  using Cause = replication::PublicationProblem::Cause;
  const auto missing = replication::check_publication_covers(conn, "no_such_pub", {{"public", "chk_a"}});
  ASSERT_TRUE(missing) << "missing publication accepted";
  EXPECT_EQ(missing->cause, Cause::missing);
  EXPECT_NE(missing->message.find("publication \"no_such_pub\" does not exist"), std::string::npos) << missing->message;
  conn.create_publication("chk_pub", {{"public", "chk_a"}});
  EXPECT_FALSE(replication::check_publication_covers(conn, "chk_pub", {{"public", "chk_a"}}));
  const auto uncovered =
      replication::check_publication_covers(conn, "chk_pub", {{"public", "chk_a"}, {"public", "chk_b"}});
  ASSERT_TRUE(uncovered) << "uncovered table accepted";
  EXPECT_EQ(uncovered->cause, Cause::table_left_out);
  EXPECT_NE(uncovered->message.find("does not include table public.chk_b"), std::string::npos) << uncovered->message;
  EXPECT_NE(uncovered->message.find("ALTER PUBLICATION chk_pub ADD TABLE"), std::string::npos) << uncovered->message;
  const auto absent = replication::check_publication_covers(conn, "chk_pub", {{"public", "chk_none"}});
  ASSERT_TRUE(absent) << "a table that does not exist accepted";
  EXPECT_EQ(absent->cause, Cause::table_missing);
  const auto pub = conn.publication("chk_pub");
  ASSERT_TRUE(pub);
  EXPECT_TRUE(pub->publishes_insert);
  EXPECT_FALSE(pub->via_root);
}

TEST_F(StreamTest, ServerShutdownEndsTheStreamWithAReason) {
  const auto box = make_outbox("shut", {"CREATE TABLE shut_outbox (id int)"}, {{"public", "shut_outbox"}});
  Session s(pg.dsn(), box.start());
  pg.exec("INSERT INTO shut_outbox VALUES (1)");
  ASSERT_TRUE(s.run_until([&] { return !s.collector.txns.empty(); }, 30s));
  s.stream->set_flush(s.collector.txns[0].end_lsn);
  s.stream->send_status_now();
  std::thread stopper([&] { pg.restart(PgCluster::Stop::fast); });
  const bool ended = s.run_until([&] { return s.ended.has_value(); }, 60s);
  stopper.join();
  ASSERT_TRUE(ended);
  EXPECT_NE(s.ended->reason, StreamEnd::Reason::stopped);
}

}  // namespace
}  // namespace pgoutbox::test
