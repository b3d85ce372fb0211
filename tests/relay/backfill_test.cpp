// Backfill at slot creation (issue 15 item 1) against a real PostgreSQL and Kafka: rows committed
// before the slot come from its exported snapshot, rows after it from the stream, each once.
#include <gtest/gtest.h>

#include <librdkafka/rdkafka.h>

#include <atomic>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "eventually.h"
#include "kafka_client.h"
#include "relay_config.h"
#include "relay_runner.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

class BackfillTest : public ::testing::Test {
 protected:
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();

  // The seeds' local message table: status NEW until a poller marks it SENT.
  config::Config message_table(const std::string& name) {
    pg.exec("CREATE TABLE " + name +
            " (id bigserial PRIMARY KEY, aggregatetype text NOT NULL DEFAULT 'Order', aggregateid text, "
            "payload jsonb, status text NOT NULL DEFAULT 'NEW', retries int NOT NULL DEFAULT 0)");
    auto cfg = relay_config(pg.dsn(), kafka.bootstrap(), name);
    cfg.tables[0].backfill.where = "status = 'NEW'";
    cfg.tables[0].backfill.chunk_rows = 100;
    slots_.push_back(cfg.postgres.slot);
    return cfg;
  }

  void insert_rows(const std::string& table, int n, const std::string& status = "NEW") {
    pg.exec(fmt::format(
        "INSERT INTO {} (aggregateid, payload, status) SELECT 'k' || g, jsonb_build_object('n', g), '{}' FROM "
        "generate_series(1, {}) g",
        table, status, n));
  }

  // How many records of the topic carry each event id.
  std::map<std::string, int> ids_in(const std::string& topic, std::size_t expected) {
    std::map<std::string, int> out;
    for (const auto& r : read_topic(kafka.bootstrap(), topic, expected, 60s)) ++out[r.header("id").value_or("")];
    return out;
  }

  bool slot_exists(const std::string& slot) {
    return pg.query_value("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot + "'") == "1";
  }

  void TearDown() override {
    for (const auto& slot : slots_) {
      pg.drop_slot_when_free(slot);
      pg.drop_slot_when_free(slot + "_backfilling");
      pg.drop_slot_when_free(slot + "_backfilled");
    }
  }

  std::vector<std::string> slots_;
};

// A writer inserts NEW rows all along, from before the slot exists until after streaming began:
// each of them, and each NEW row written earlier, reaches Kafka exactly once; SENT rows never.
TEST_F(BackfillTest, RowsBeforeTheSlotFromTheSnapshotRowsAfterFromTheStreamEachOnce) {
  auto cfg = message_table("bf_once");
  create_topic(kafka.bootstrap(), "bf_once.Order", 3);
  insert_rows("bf_once", 1500);
  insert_rows("bf_once", 300, "SENT");
  std::atomic<bool> writing{true};
  std::atomic<int> written{0};
  std::thread writer([&] {
    auto conn = pg.connect();
    while (writing) {
      exec_on(conn.get(), "INSERT INTO bf_once (aggregateid, payload) VALUES ('w', '{}')");
      ++written;
    }
  });
  PGOUTBOX_ASSERT_EVENTUALLY(written.load() > 50, 30s);
  RelayRunner relay(cfg);
  {
    ASSERT_FALSE(relay.done()) << relay.outcome().reason;
    const int at_streaming = written.load();
    PGOUTBOX_ASSERT_EVENTUALLY(written.load() > at_streaming + 200, 30s);
    writing = false;
    writer.join();
  }
  const auto expected = std::stoull(*pg.query_value("SELECT count(*) FROM bf_once WHERE status = 'NEW'"));
  // Read while the relay still streams: the writer's last rows may not have reached it yet.
  const auto ids = ids_in("bf_once.Order", expected);
  relay.stop();
  EXPECT_EQ(ids.size(), expected);
  int doubled = 0;
  for (const auto& [id, n] : ids) doubled += n > 1 ? 1 : 0;
  EXPECT_EQ(doubled, 0);
  const auto rows = pg.query("SELECT id::text, status FROM bf_once");
  int lost = 0;
  int sent_published = 0;
  for (const auto& row : rows) {
    const bool published = ids.count(*row[0]) != 0;
    if (*row[1] == "NEW" && !published) ++lost;
    if (*row[1] == "SENT" && published) ++sent_published;
  }
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(sent_published, 0);
  EXPECT_TRUE(slot_exists(cfg.postgres.slot + "_backfilled"));
  EXPECT_FALSE(slot_exists(cfg.postgres.slot + "_backfilling"));
}

// Issue 24 item 3: two instances of one configuration started 1 s apart, the first still
// backfilling a large table when the second looks. The slot is inactive between its creation and
// the end of its backfill; the second must wait (as a standby does), not drop it and start its
// own slot later. Writers insert rows the backfill's predicate excludes and rows they delete in
// the same transaction: only the first slot's stream carries them, and every one must arrive.
TEST_F(BackfillTest, ASecondInstanceNeverDropsASlotStillBackfilling) {
  constexpr int kRows = 100'000;
  auto cfg = message_table("bf_two");
  cfg.tables[0].backfill.chunk_rows = 1000;
  cfg.limits.max_in_flight_records = 1000;
  create_topic(kafka.bootstrap(), "bf_two.Order", 3);
  insert_rows("bf_two", kRows);

  std::atomic<bool> writing{true};
  std::atomic<int> written{0};
  std::vector<std::string> streamed_ids;  // SENT rows, and rows deleted at once: stream only
  std::mutex ids_mutex;
  std::thread writer([&] {
    // From the slot's consistent point on: what commits earlier and the predicate excludes is
    // rightly in neither the snapshot nor the stream.
    const std::string consistent = "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + cfg.postgres.slot +
                                   "' AND confirmed_flush_lsn IS NOT NULL";
    while (writing && pg.query_value(consistent) != "1") std::this_thread::sleep_for(5ms);
    auto conn = pg.connect();
    while (writing) {
      const auto sent = PQexec(conn.get(),
                               "INSERT INTO bf_two (aggregateid, payload, status) VALUES ('w', '{}', 'SENT') "
                               "RETURNING id::text");
      const std::string sent_id = PQgetvalue(sent, 0, 0);
      PQclear(sent);
      // Inserted and deleted in one transaction: only the stream shows the insert.
      exec_on(conn.get(), "BEGIN");
      const auto gone =
          PQexec(conn.get(), "INSERT INTO bf_two (aggregateid, payload) VALUES ('w', '{}') RETURNING id::text");
      const std::string gone_id = PQgetvalue(gone, 0, 0);
      PQclear(gone);
      exec_on(conn.get(), "DELETE FROM bf_two WHERE id = " + gone_id);
      exec_on(conn.get(), "COMMIT");
      {
        const std::lock_guard lock(ids_mutex);
        streamed_ids.push_back(sent_id);
        streamed_ids.push_back(gone_id);
      }
      ++written;
      std::this_thread::sleep_for(2ms);
    }
  });

  // The first instance creates the slot and backfills; the second starts 1 s later and keeps
  // trying, as `pgoutbox run` does, until the test ends.
  // Each session is published under the mutex while it runs, so that a stop is posted only to
  // a session that still exists.
  std::mutex sessions;
  relay::Session* first = nullptr;
  relay::Session* second = nullptr;
  const auto stop_all = [&] {
    const std::lock_guard lock(sessions);
    for (auto* session : {first, second}) {
      if (session != nullptr) boost::asio::post(session->io(), [session] { session->stop(); });
    }
  };
  std::atomic<bool> first_streaming{false};
  std::atomic<bool> first_done{false};
  std::atomic<bool> second_running{true};
  std::atomic<bool> second_done{false};
  std::atomic<int> second_standby{0};
  std::atomic<int> second_other{0};
  std::string second_reason;
  relay::Outcome first_outcome;
  std::thread a([&] {
    relay::Session session(cfg);
    {
      const std::lock_guard lock(sessions);
      first = &session;
    }
    std::thread watch([&] {
      while (!first_done && !session.streaming()) std::this_thread::sleep_for(10ms);
      first_streaming = session.streaming();
    });
    first_outcome = session.run();
    first_done = true;
    watch.join();
    const std::lock_guard lock(sessions);
    first = nullptr;
  });
  std::this_thread::sleep_for(1s);
  std::thread b([&] {
    while (second_running) {
      relay::Session session(cfg);
      {
        const std::lock_guard lock(sessions);
        second = &session;
      }
      const auto outcome = session.run();
      {
        const std::lock_guard lock(sessions);
        second = nullptr;
      }
      if (outcome.standby) {
        ++second_standby;
      } else if (second_running) {
        ++second_other;
        second_reason = outcome.reason;
      }
      std::this_thread::sleep_for(200ms);
    }
    second_done = true;
  });
  // Threads run: a failed wait is noted and the test goes on to stop them.
  EXPECT_TRUE(eventually([&] { return first_streaming.load() || first_done.load(); }, 120s));
  EXPECT_FALSE(first_done.load()) << first_outcome.reason;
  const int at_streaming = written.load();
  EXPECT_TRUE(eventually([&] { return written.load() > at_streaming + 100; }, 30s));
  writing = false;
  writer.join();

  std::set<std::string> expected;
  for (const auto& row : pg.query("SELECT id::text FROM bf_two WHERE status = 'NEW'")) expected.insert(*row[0]);
  for (const auto& id : streamed_ids) expected.insert(id);
  const auto ids = ids_in("bf_two.Order", expected.size());
  second_running = false;
  while (!first_done) {
    stop_all();
    std::this_thread::sleep_for(50ms);
  }
  a.join();
  while (!second_done) {
    stop_all();
    std::this_thread::sleep_for(50ms);
  }
  b.join();

  std::size_t lost = 0;
  std::string first_lost;
  for (const auto& id : expected) {
    if (ids.count(id) != 0) continue;
    if (lost++ == 0) first_lost = id;
  }
  std::cout << "FAULT backfill-two-instances: rows=" << kRows << ", stream_only=" << streamed_ids.size()
            << ", expected=" << expected.size() << ", delivered=" << ids.size() << ", lost=" << lost
            << ", second_waited=" << second_standby.load() << "\n";
  EXPECT_EQ(lost, 0U) << "first lost: " << first_lost;
  EXPECT_GT(second_standby.load(), 0) << "the second instance never waited";
  EXPECT_EQ(second_other.load(), 0) << second_reason;
  EXPECT_EQ(first_outcome.kind, relay::Outcome::Kind::stopped) << first_outcome.reason;
}

// A restart of a slot whose backfill finished streams on and backfills nothing again.
TEST_F(BackfillTest, AFinishedBackfillIsNotRepeated) {
  auto cfg = message_table("bf_again");
  insert_rows("bf_again", 250);
  {
    RelayRunner relay(cfg);
    ASSERT_FALSE(relay.done()) << relay.outcome().reason;
  }
  {
    RelayRunner relay(cfg);
    ASSERT_FALSE(relay.done()) << relay.outcome().reason;
    insert_rows("bf_again", 1);
    PGOUTBOX_ASSERT_EVENTUALLY(relay.counters().records_acked >= 1U, 30s);
    EXPECT_EQ(relay.counters().records_acked, 1U);
  }
  EXPECT_EQ(ids_in("bf_again.Order", 251).size(), 251U);
}

// Stopped in the middle of the backfill (few rows in flight, small chunks), the next start drops
// the slot and backfills again from the start: no row is lost.
TEST_F(BackfillTest, AnInterruptedBackfillStartsAgainWithoutLosingRows) {
  auto cfg = message_table("bf_restart");
  cfg.tables[0].backfill.chunk_rows = 10;
  cfg.limits.max_in_flight_records = 10;
  insert_rows("bf_restart", 3000);
  {
    // Stops once some rows are acknowledged, long before 3000 are: on the relay's own thread, at
    // its progress report, so a fast machine cannot finish the backfill first.
    struct StopAfterSomeRows final : relay::Observer {
      relay::Session* session = nullptr;
      bool stopping = false;
      void backfill_progress(std::string_view, std::uint64_t, std::uint64_t published, std::uint64_t) override {
        if (stopping || published < 10 || session == nullptr) return;
        stopping = true;
        boost::asio::post(session->io(), [s = session] { s->stop(); });
      }
    } stopper;
    relay::Session session(cfg, &stopper);
    stopper.session = &session;
    const auto outcome = session.run();
    EXPECT_EQ(outcome.kind, relay::Outcome::Kind::stopped) << outcome.reason;
    EXPECT_TRUE(stopper.stopping);
    EXPECT_FALSE(session.streamed());
  }
  const auto first = ids_in("bf_restart.Order", 1).size();
  EXPECT_LT(first, 3000U);
  EXPECT_TRUE(slot_exists(cfg.postgres.slot + "_backfilling"));
  EXPECT_FALSE(slot_exists(cfg.postgres.slot + "_backfilled"));
  insert_rows("bf_restart", 5);  // after the first slot: only the second slot's snapshot has them
  cfg.limits.max_in_flight_records = 20'000;
  {
    RelayRunner relay(cfg);
    ASSERT_FALSE(relay.done()) << relay.outcome().reason;
  }
  const auto ids = ids_in("bf_restart.Order", 3005);
  EXPECT_EQ(ids.size(), 3005U);
  EXPECT_TRUE(slot_exists(cfg.postgres.slot + "_backfilled"));
  EXPECT_FALSE(slot_exists(cfg.postgres.slot + "_backfilling"));
}

// The cutover from the seeds' polling relay (docs/migrating.md "Switching from a polling relay"): a poller
// publishes NEW rows and marks them SENT while a writer inserts; pgoutbox starts with backfill
// status = 'NEW'; then the poller dies between publishing a batch and marking it SENT. Nothing
// is lost; an event is doubled only when the poller published it and its SENT mark was not
// visible in the slot's snapshot (its batch at the switch, and what it published after), and
// pgoutbox itself publishes no event twice.
TEST_F(BackfillTest, CutoverFromAPollerUnderLoadLosesNothing) {
  auto cfg = message_table("bf_cut");
  create_topic(kafka.bootstrap(), "bf_cut.Order", 3);
  insert_rows("bf_cut", 500);
  std::atomic<bool> writing{true};
  std::thread writer([&] {
    auto conn = pg.connect();
    while (writing) exec_on(conn.get(), "INSERT INTO bf_cut (aggregateid, payload) VALUES ('w', '{}')");
  });
  std::atomic<bool> polling{true};
  std::atomic<int> batches{0};
  std::thread poller([&] {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", kafka.bootstrap().c_str(), err, sizeof err);
    rd_kafka_conf_set(conf, "enable.idempotence", "true", err, sizeof err);
    rd_kafka_t* producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    auto conn = pg.connect();
    for (;;) {
      exec_on(conn.get(), "BEGIN");
      PGresult* rows =
          PQexec(conn.get(),
                 "SELECT id::text, aggregateid, payload::text FROM bf_cut WHERE status = 'NEW' ORDER BY id "
                 "LIMIT 50 FOR UPDATE SKIP LOCKED");
      std::string ids;
      for (int r = 0; r < PQntuples(rows); ++r) {
        const std::string id = PQgetvalue(rows, r, 0);
        rd_kafka_producev(producer, RD_KAFKA_V_TOPIC("bf_cut.Order"),
                          RD_KAFKA_V_KEY(PQgetvalue(rows, r, 1), static_cast<std::size_t>(PQgetlength(rows, r, 1))),
                          RD_KAFKA_V_VALUE(PQgetvalue(rows, r, 2), static_cast<std::size_t>(PQgetlength(rows, r, 2))),
                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADER("id", id.c_str(), -1),
                          RD_KAFKA_V_HEADER("relay", "poller", -1), RD_KAFKA_V_END);
        ids += (ids.empty() ? "" : ",") + id;
      }
      PQclear(rows);
      rd_kafka_flush(producer, 10000);
      if (!polling) break;  // killed after publishing the batch, before marking it SENT
      if (!ids.empty()) exec_on(conn.get(), "UPDATE bf_cut SET status = 'SENT' WHERE id IN (" + ids + ")");
      exec_on(conn.get(), "COMMIT");
      ++batches;
    }
    conn.reset();  // the open transaction rolls back
    rd_kafka_destroy(producer);
  });
  PGOUTBOX_ASSERT_EVENTUALLY(batches.load() > 5, 60s);
  const int before_slot = batches.load();
  RelayRunner relay(cfg);
  const bool streaming = !relay.done();
  const int at_switch = batches.load();
  PGOUTBOX_EXPECT_EVENTUALLY(batches.load() > at_switch + 2, 30s);
  polling = false;
  poller.join();
  std::this_thread::sleep_for(500ms);  // the writer goes on with pgoutbox alone
  writing = false;
  writer.join();
  ASSERT_TRUE(streaming) << relay.outcome().reason;

  const auto all = std::stoull(*pg.query_value("SELECT count(*) FROM bf_cut"));
  std::map<std::string, int> by_pgoutbox;
  std::map<std::string, int> by_poller;
  std::set<std::string> seen;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (seen.size() < all && std::chrono::steady_clock::now() < deadline) {
    by_pgoutbox.clear();
    by_poller.clear();
    seen.clear();
    for (const auto& r : read_topic(kafka.bootstrap(), "bf_cut.Order", all, 10s)) {
      const auto id = r.header("id").value_or("");
      ++(r.header("relay") == "poller" ? by_poller : by_pgoutbox)[id];
      seen.insert(id);
    }
  }
  relay.stop();
  EXPECT_EQ(seen.size(), all) << "lost: " << all - seen.size();
  int pgoutbox_twice = 0;
  int poller_twice = 0;
  int duplicates = 0;
  for (const auto& [id, n] : by_pgoutbox) {
    pgoutbox_twice += n > 1 ? 1 : 0;
    duplicates += by_poller.count(id) != 0 ? 1 : 0;
  }
  for (const auto& [id, n] : by_poller) poller_twice += n > 1 ? 1 : 0;
  EXPECT_EQ(pgoutbox_twice, 0);
  EXPECT_EQ(poller_twice, 0);
  // Every duplicate is a row the poller published after the snapshot, so at most the batches it
  // published from the switch to its death (50 rows each, at least one: the batch it died in).
  EXPECT_GT(duplicates, 0);
  const int after_slot = batches.load() - before_slot + 1;  // with the one it died in
  EXPECT_LE(duplicates, 50 * after_slot);
  RecordProperty("rows", static_cast<int>(all));
  RecordProperty("duplicates", duplicates);
  std::printf("cutover: %llu rows, %llu lost, %d published twice (poller batches since pgoutbox started: %d)\n",
              static_cast<unsigned long long>(all), static_cast<unsigned long long>(all - seen.size()), duplicates,
              after_slot);
}

TEST_F(BackfillTest, APredicateThatIsNotSqlForTheTableIsRefusedBeforeTheSlotExists) {
  auto cfg = message_table("bf_bad");
  cfg.tables[0].backfill.where = "no_such_column = 1";
  relay::Session session(cfg);
  const auto outcome = session.run();
  EXPECT_EQ(outcome.kind, relay::Outcome::Kind::fatal);
  EXPECT_EQ(outcome.cause, relay::Fatal::mapping);
  EXPECT_NE(outcome.reason.find("no_such_column"), std::string::npos) << outcome.reason;
  EXPECT_NE(outcome.reason.find("backfill.where"), std::string::npos) << outcome.reason;
  EXPECT_FALSE(slot_exists(cfg.postgres.slot));
}

// PREPARE does not evaluate the predicate: a cast that fails on one row is found only when the
// rows are read, and retrying would fail the same way.
TEST_F(BackfillTest, APredicateThatFailsOnARowStopsWithTheMappingCode) {
  auto cfg = message_table("bf_cast");
  insert_rows("bf_cast", 20);                                     // aggregateid k1 … k20
  pg.exec("UPDATE bf_cast SET aggregateid = 'kx' WHERE id = 7");  // 'x'::int fails
  cfg.tables[0].backfill.where = "substr(aggregateid, 2)::int > 0";
  relay::Session session(cfg);
  const auto outcome = session.run();
  EXPECT_EQ(outcome.kind, relay::Outcome::Kind::fatal) << outcome.reason;
  EXPECT_EQ(outcome.cause, relay::Fatal::mapping) << outcome.reason;
  EXPECT_NE(outcome.reason.find("invalid input syntax for type integer"), std::string::npos) << outcome.reason;
  EXPECT_NE(outcome.reason.find("backfill.where"), std::string::npos) << outcome.reason;
}

// A configuration built without the loader still gets the lexical check (SECURITY.md "Backfill
// and republish predicates"): the predicate never reaches PostgreSQL.
TEST_F(BackfillTest, APredicateThatClosesTheParenthesisIsRefusedBeforeTheSlotExists) {
  auto cfg = message_table("bf_inject");
  cfg.tables[0].backfill.where = "true) UNION SELECT 1, 'x', 'y', '{}', 'z', 0 --";
  relay::Session session(cfg);
  const auto outcome = session.run();
  EXPECT_EQ(outcome.kind, relay::Outcome::Kind::fatal) << outcome.reason;
  EXPECT_EQ(outcome.cause, relay::Fatal::mapping) << outcome.reason;
  EXPECT_NE(outcome.reason.find("closes the parenthesis of WHERE"), std::string::npos) << outcome.reason;
  EXPECT_FALSE(slot_exists(cfg.postgres.slot));
}

// The count of a slow predicate is cancelled at backfill.statement_timeout, and the session
// stops: every attempt would be cancelled the same way.
TEST_F(BackfillTest, ASlowPredicateStopsAtTheStatementTimeout) {
  auto cfg = message_table("bf_slow");
  insert_rows("bf_slow", 20);
  cfg.tables[0].backfill.where = "pg_sleep(5) IS NOT NULL";  // 100 s without the timeout
  cfg.tables[0].backfill.statement_timeout = 1s;
  relay::Session session(cfg);
  const auto started = std::chrono::steady_clock::now();
  const auto outcome = session.run();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 30s);
  EXPECT_EQ(outcome.kind, relay::Outcome::Kind::fatal) << outcome.reason;
  EXPECT_EQ(outcome.cause, relay::Fatal::mapping) << outcome.reason;
  EXPECT_NE(outcome.reason.find("statement timeout"), std::string::npos) << outcome.reason;
  EXPECT_NE(outcome.reason.find("backfill.statement_timeout"), std::string::npos) << outcome.reason;
}

TEST_F(BackfillTest, ABackfillForASlotThatAlreadyExistsIsRefusedNamingRepublish) {
  auto cfg = message_table("bf_late");
  pg.exec("SELECT pg_create_logical_replication_slot('" + cfg.postgres.slot + "', 'pgoutput')");
  pg.exec("CREATE PUBLICATION " + cfg.postgres.publication + " FOR TABLE bf_late WITH (publish = 'insert')");
  relay::Session session(cfg);
  const auto outcome = session.run();
  EXPECT_EQ(outcome.kind, relay::Outcome::Kind::fatal);
  EXPECT_EQ(outcome.cause, relay::Fatal::slot_unusable);
  EXPECT_NE(outcome.reason.find("pgoutbox republish"), std::string::npos) << outcome.reason;
}

}  // namespace
}  // namespace pgoutbox::test
