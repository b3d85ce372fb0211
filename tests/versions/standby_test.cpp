// pgoutbox decoding on a physical hot standby (Postgres 16+, docs/versions.md "Decoding on a
// standby"): the primary writes the outbox, the standby replays it and its walsender decodes it,
// so the primary does no decoding. The standby is a base backup taken with pg_backup_start() /
// pg_backup_stop() and a copy (tests/support/pg_standby.h), with hot_standby_feedback and a
// physical slot on the primary, the outbox table and its publication made on the primary first,
// exactly as an operator would set it up. Every case audits Kafka against the rows the primary
// committed: nothing may be confirmed that was not published (docs/spec.md I2, I9, I13).
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "../app/operator_fixture.h"
#include "eventually.h"
#include "http_get.h"
#include "kafka_client.h"
#include "pg_standby.h"
#include "pgoutbox_process.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

std::string log_of(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::set<std::string> keys_in(const std::string& bootstrap, const std::string& topic, std::size_t expected) {
  std::set<std::string> keys;
  for (const auto& r : read_topic(bootstrap, topic, expected, 10s)) keys.insert(r.key.value_or(""));
  return keys;
}

// A primary with the outbox table and its publication, and a hot standby made from it.
class StandbyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    primary_ = std::make_unique<PgCluster>();
    if (primary_->server_major() < 16) GTEST_SKIP() << "decoding on a standby needs Postgres 16+";
    primary_->exec(
        "CREATE TABLE sb_outbox (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text NOT NULL, "
        "aggregateid text, type text, payload jsonb);"
        "CREATE PUBLICATION sb_pub FOR TABLE public.sb_outbox WITH (publish = 'insert')");
    standby_ = make_standby(*primary_, "sb_standby", {{"hot_standby_feedback", "on"}});
  }

  std::string standby_dsn() const {
    return "host=127.0.0.1 port=" + std::to_string(standby_->port()) + " user=postgres dbname=postgres";
  }
  std::string primary_dsn() const {
    return "host=127.0.0.1 port=" + std::to_string(primary_->port()) + " user=postgres dbname=postgres";
  }

  std::string primary_dsn_key() const { return "  primary_dsn: \"" + primary_dsn() + "\"\n"; }

  std::string write_config(const std::string& topic, const std::string& extra_postgres = "",
                           const std::string& dsn = "") {
    PgoutboxConfig c;
    c.metrics_address = "127.0.0.1:" + std::to_string(metrics_port_);
    c.dsn = dsn.empty() ? standby_dsn() : dsn;
    c.slot = "sb_slot";
    c.publication = "sb_pub";
    c.create_publication = false;
    c.brokers = shared_kafka().bootstrap();
    c.tables.push_back({.table = "public.sb_outbox", .topic = topic});
    c.extra_yaml = "reconnect:\n  min: 100ms\n  max: 1s\n";
    auto path = write_pgoutbox_config(dir_.path() + "/pgoutbox.yaml", c);
    if (!extra_postgres.empty()) {
      // postgres: is the file's first section: its keys go right after the ones written above.
      std::ifstream in(path);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      text.insert(text.find("kafka:\n"), extra_postgres);
      std::ofstream(path, std::ios::trunc) << text;
    }
    return path;
  }

  void insert_rows(const std::string& prefix, int n) const {
    primary_->exec("INSERT INTO sb_outbox (aggregatetype, aggregateid, payload) SELECT 'E', '" + prefix +
                   "' || g, '{}' FROM generate_series(1, " + std::to_string(n) + ") g");
  }

  void creation_race(bool ask_primary);

  // One metric from pgoutbox's /metrics, or -1 while it has none.
  double metric(const std::string& name) const {
    return sample_sum(http_get("127.0.0.1", metrics_port_, "/metrics").body, name).value_or(-1);
  }
  std::string slot_column(const std::string& column) const {
    return standby_->query_value("SELECT " + column + " FROM pg_replication_slots WHERE slot_name = 'sb_slot'")
        .value_or("");
  }

  // pgoutbox on the standby with postgres.primary_dsn, streaming, with `rows` of `topic` in Kafka.
  std::unique_ptr<PgoutboxProcess> start_streaming(const std::string& topic, int rows, const std::string& log,
                                                   const std::string& dsn = "") {
    auto process = std::make_unique<PgoutboxProcess>(PGOUTBOX_BINARY, write_config(topic, primary_dsn_key(), dsn), log);
    PGOUTBOX_EXPECT_EVENTUALLY(slot_column("active AND confirmed_flush_lsn IS NOT NULL") == "t", 60s) << tail_of(log);
    insert_rows(topic + "-", rows);
    PGOUTBOX_EXPECT_EVENTUALLY(
        keys_in(shared_kafka().bootstrap(), topic, rows).size() >= static_cast<std::size_t>(rows), 60s)
        << tail_of(log);
    return process;
  }

  std::unique_ptr<PgCluster> primary_;
  std::unique_ptr<PgCluster> standby_;
  ScratchDir dir_{"standby", std::nullopt};
  int metrics_port_ = free_loopback_port();
};

// The operator's first start against a new standby: the slot is created there, the rows the
// primary commits right after are published, a SIGKILL loses none, and after pg_promote() the
// same process goes on streaming from the slot that is now on the new primary.
TEST_F(StandbyTest, EveryRowIsPublishedFromTheFirstStartThroughAKillAndAPromotion) {
  const std::string topic = "sb_events";
  // The primary is idle here: without postgres.primary_dsn the creation would wait for its next
  // checkpoint (on 17 it did not end within 90 s).
  const auto cfg = write_config(topic, primary_dsn_key());
  const auto bootstrap = shared_kafka().bootstrap();
  auto process = std::make_unique<PgoutboxProcess>(PGOUTBOX_BINARY, cfg, dir_.path() + "/run1.log");
  // Created and streaming: the slot has its consistent point (active is true while it is still
  // being created, waiting for a running-transactions record).
  PGOUTBOX_ASSERT_EVENTUALLY(standby_->query_value("SELECT active AND confirmed_flush_lsn IS NOT NULL FROM "
                                                   "pg_replication_slots WHERE slot_name = 'sb_slot'") == "t",
                             90s)
      << tail_of(dir_.path() + "/run1.log");
  const auto before = primary_->query_value("SELECT pg_current_wal_lsn()").value_or("?");
  const auto created_at =
      standby_->query_value("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'sb_slot'");
  std::cout << "slot created at " << created_at.value_or("?") << ", primary at " << before
            << " before the first rows\n";
  insert_rows("first-", 2000);
  wait_replayed(*primary_, *standby_);
  std::set<std::string> got;
  EXPECT_TRUE(eventually(
      [&] {
        got = keys_in(bootstrap, topic, 2000);
        return got.size() >= 2000;
      },
      90s, 1s))
      << got.size() << " of the 2,000 rows committed after the slot's creation reached Kafka; slot at "
      << standby_->query_value("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'sb_slot'")
             .value_or("?")
      << "\n"
      << tail_of(dir_.path() + "/run1.log");

  process->kill9();
  insert_rows("second-", 1000);
  process = std::make_unique<PgoutboxProcess>(PGOUTBOX_BINARY, cfg, dir_.path() + "/run2.log");
  EXPECT_TRUE(eventually([&] { return keys_in(bootstrap, topic, 3000).size() >= 3000; }, 90s, 1s))
      << tail_of(dir_.path() + "/run2.log");

  standby_->exec("SELECT pg_promote(true, 60)");
  ASSERT_EQ(standby_->query_value("SELECT pg_is_in_recovery()"), "f");
  standby_->exec(
      "INSERT INTO sb_outbox (aggregatetype, aggregateid, payload) SELECT 'E', 'promoted-' || g, '{}' "
      "FROM generate_series(1, 500) g");
  got.clear();
  EXPECT_TRUE(eventually(
      [&] {
        got = keys_in(bootstrap, topic, 3500);
        return got.size() >= 3500;
      },
      90s, 1s))
      << got.size() << " of 3,500\n"
      << tail_of(dir_.path() + "/run2.log");
  EXPECT_TRUE(process->running()) << "pgoutbox went on streaming after the promotion without a restart";
  const auto rows = standby_->query_value("SELECT count(*) FROM sb_outbox");
  std::cout << "standby: " << rows.value_or("?") << " rows committed, " << got.size() << " distinct in Kafka\n";
  EXPECT_EQ(std::to_string(got.size()), rows.value_or(""));
  process->signal(SIGTERM);
  EXPECT_EQ(process->wait_exit(30s), 0);
}

// Rows committed on the primary while pgoutbox creates its slot on the standby. A new slot starts
// at its consistent point, which on a standby waits for the primary's next running-transactions
// record. A writer commits one row every 2 ms from before pgoutbox starts, noting the primary's
// insert position before each: every row begun after the consistent point must reach Kafka.
// With postgres.primary_dsn, pgoutbox asks the primary for that record (pg_log_standby_snapshot())
// and the creation, and so the window of rows the new slot cannot hold, shrinks to about a second.
void StandbyTest::creation_race(bool ask_primary) {
  const std::string topic = ask_primary ? "sb_race_asked" : "sb_race";
  const auto cfg = write_config(topic, ask_primary ? primary_dsn_key() : "");
  // check names what the standby needs and what the creation will wait for.
  const auto check = run_pgoutbox(dir_.path(), {"check", "-c", cfg});
  EXPECT_NE(line_starting(check.output, ask_primary ? "ok    hot standby: hot_standby_feedback = on"
                                                    : "WARN  hot standby: postgres.primary_dsn is not set"),
            "")
      << check.output;
  std::atomic<bool> writing{true};
  std::vector<std::pair<std::string, std::string>> written;  // key, the primary's position before it
  std::mutex written_mutex;
  std::thread writer([&] {
    auto conn = primary_->connect();
    for (int n = 0; writing; ++n) {
      const std::string key = "race-" + std::to_string(n);
      std::unique_ptr<PGresult, decltype(&PQclear)> before(PQexec(conn.get(), "SELECT pg_current_wal_insert_lsn()"),
                                                           &PQclear);
      const std::string position = PQgetvalue(before.get(), 0, 0);
      exec_on(conn.get(),
              "INSERT INTO sb_outbox (aggregatetype, aggregateid, payload) VALUES ('E', '" + key + "', '{}')");
      {
        const std::lock_guard lock(written_mutex);
        written.emplace_back(key, position);
      }
      std::this_thread::sleep_for(2ms);
    }
  });
  auto process = std::make_unique<PgoutboxProcess>(PGOUTBOX_BINARY, cfg, dir_.path() + "/run.log");
  EXPECT_TRUE(eventually(
      [&] {
        return standby_->query_value(
                   "SELECT confirmed_flush_lsn IS NOT NULL FROM pg_replication_slots WHERE "
                   "slot_name = 'sb_slot'") == "t";
      },
      90s))
      << tail_of(dir_.path() + "/run.log");
  const auto created_at =
      standby_->query_value("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'sb_slot'")
          .value_or("0/0");
  std::this_thread::sleep_for(3s);  // the writer goes on past the creation
  writing = false;
  writer.join();
  wait_replayed(*primary_, *standby_);
  std::vector<std::string> must;  // keys begun after the consistent point
  for (const auto& [key, position] : written) {
    if (primary_->query_value("SELECT '" + position + "'::pg_lsn >= '" + created_at + "'::pg_lsn") == "t") {
      must.push_back(key);
    }
  }
  ASSERT_FALSE(must.empty()) << "no row was written after the consistent point " << created_at;
  std::set<std::string> got;
  const bool all = eventually(
      [&] {
        got = keys_in(shared_kafka().bootstrap(), topic, must.size());
        for (const auto& k : must) {
          if (got.count(k) == 0) return false;
        }
        return true;
      },
      60s, 1s);
  std::size_t missing = 0;
  for (const auto& k : must) missing += got.count(k) == 0 ? 1 : 0;
  const auto log = log_of(dir_.path() + "/run.log");
  EXPECT_NE(log.find(ask_primary ? "asking the primary (postgres.primary_dsn)" : "it waits for the primary's next"),
            std::string::npos)
      << log;
  std::cout << "standby creation race" << (ask_primary ? " (primary_dsn)" : "") << ": " << written.size()
            << " rows written, consistent point " << created_at << ", " << must.size() << " written after it, "
            << missing << " of those missing from Kafka\n";
  EXPECT_TRUE(all) << missing << " rows written after the consistent point never reached Kafka\n"
                   << tail_of(dir_.path() + "/run.log");
  process->signal(SIGTERM);
  EXPECT_EQ(process->wait_exit(30s), 0);
}

TEST_F(StandbyTest, EveryRowWrittenAfterTheConsistentPointIsPublishedWhileWritesRunThroughCreation) {
  creation_race(false);
}

TEST_F(StandbyTest, WithPrimaryDsnTheCreationAsksThePrimaryAndEveryLaterRowIsPublished) { creation_race(true); }
// docs/spec.md I7 on a standby: while the outbox is quiet and other tables take 100,000 rows, the
// slot's confirmed position and restart_lsn follow the standby's replay (a standby's slot moves
// only with WAL it has replayed and a running-transactions record from the primary), and the
// primary's physical slot for the standby follows the primary: neither server keeps the WAL.
// postgres.dsn lists both servers with target_session_attrs=standby.
TEST_F(StandbyTest, AQuietOutboxPinsNoWalOnTheStandbyNorThePrimaryWhileOtherTablesAreWritten) {
  primary_->exec("CREATE TABLE sb_other (id bigserial PRIMARY KEY, note text)");
  // check reads the primary over postgres.primary_dsn: one naming a standby is refused.
  const auto wrong =
      run_pgoutbox(dir_.path(), {"check", "-c", write_config("sb_idle", "  primary_dsn: \"" + standby_dsn() + "\"\n")});
  EXPECT_NE(line_starting(wrong.output, "FAIL  hot standby: postgres.primary_dsn is itself a standby"), "")
      << wrong.output;
  // Both servers in one DSN, as an operator lists a cluster's hosts: libpq picks the standby.
  const std::string both = "host=127.0.0.1,127.0.0.1 port=" + std::to_string(primary_->port()) + "," +
                           std::to_string(standby_->port()) +
                           " user=postgres dbname=postgres target_session_attrs=standby";
  auto process = start_streaming("sb_idle", 10, dir_.path() + "/idle.log", both);
  EXPECT_FALSE(primary_->query_value("SELECT 1 FROM pg_replication_slots WHERE slot_name = 'sb_slot'"))
      << "the slot belongs on the standby";
  const auto before = primary_->query_value("SELECT pg_current_wal_lsn()").value_or("0/0");
  primary_->exec("INSERT INTO sb_other (note) SELECT repeat('x', 100) FROM generate_series(1, 100000)");
  const auto after = primary_->query_value("SELECT pg_current_wal_lsn()").value_or("0/0");
  const auto written = primary_->query_value("SELECT pg_wal_lsn_diff('" + after + "', '" + before + "')::bigint");
  wait_replayed(*primary_, *standby_);
  const auto started = std::chrono::steady_clock::now();
  PGOUTBOX_EXPECT_EVENTUALLY(
      slot_column("confirmed_flush_lsn >= '" + after + "'::pg_lsn AND restart_lsn >= '" + after + "'::pg_lsn") == "t",
      90s)
      << "the standby's slot kept the WAL of rows it has nothing to publish from: confirmed "
      << slot_column("confirmed_flush_lsn") << ", restart_lsn " << slot_column("restart_lsn") << ", the rows end at "
      << after << "\n"
      << tail_of(dir_.path() + "/idle.log");
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  PGOUTBOX_EXPECT_EVENTUALLY(primary_->query_value("SELECT restart_lsn >= '" + after +
                                                   "'::pg_lsn FROM pg_replication_slots WHERE slot_name = "
                                                   "'sb_standby'") == "t",
                             30s);
  // What the metrics say of it: a standby, its slot's WAL, and what it holds on the primary.
  EXPECT_EQ(metric("pgoutbox_postgres_in_recovery"), 1);
  PGOUTBOX_EXPECT_EVENTUALLY(metric("pgoutbox_slot_retained_wal_bytes") >= 0 &&
                                 metric("pgoutbox_slot_retained_wal_bytes") < std::stod(written.value_or("0")),
                             30s);
  // hot_standby_feedback forwards the logical slot's catalog_xmin to the primary. Its age there
  // may be 0 (a quiet primary: once the slot's catalog_xmin reaches the next xid), so the gauge
  // is only required to be read (a fresh-clone run waited 30 s for a positive age in vain).
  PGOUTBOX_EXPECT_EVENTUALLY(primary_->query_value("SELECT catalog_xmin IS NOT NULL FROM pg_replication_slots WHERE "
                                                   "slot_name = 'sb_standby'") == "t",
                             30s)
      << "hot_standby_feedback forwards the logical slot's catalog_xmin to the primary";
  EXPECT_GE(metric("pgoutbox_primary_catalog_xmin_age"), 0);
  EXPECT_GE(metric("pgoutbox_standby_behind_primary_bytes"), 0);
  // The primary writes on (running-transactions records, pgoutbox's snapshots there): a sample
  // may meet WAL received a moment before it is replayed.
  PGOUTBOX_EXPECT_EVENTUALLY(metric("pgoutbox_standby_replay_delay_seconds") == 0, 30s)
      << "the standby has replayed all it received";
  std::cout << "standby idle: " << written.value_or("?") << " bytes of unrelated WAL; the slot was past them "
            << waited.count() << " ms after the standby replayed them\n";
  process->signal(SIGTERM);
  EXPECT_EQ(process->wait_exit(30s), 0);
}

// A recovery conflict for real: with hot_standby_feedback off, the primary's vacuum removes
// catalog rows the standby's slot still needs; the standby invalidates the slot, and pgoutbox ends
// with exit 10 and a message naming the fix.
TEST_F(StandbyTest, ASlotInvalidatedByARecoveryConflictEndsPgoutboxNamingTheFix) {
  const auto log = dir_.path() + "/conflict.log";
  auto process = start_streaming("sb_conflict", 10, log);
  // The operator turns hot_standby_feedback off and restarts the standby; pgoutbox reconnects.
  standby_->set_setting("hot_standby_feedback", "off");
  standby_->restart();
  PGOUTBOX_ASSERT_EVENTUALLY(primary_->query_value("SELECT xmin IS NULL AND catalog_xmin IS NULL FROM "
                                                   "pg_replication_slots WHERE slot_name = 'sb_standby'") == "t",
                             30s);
  bool conflicting = false;
  for (int i = 0; i < 30 && !conflicting; ++i) {
    const auto table = "sb_churn_" + std::to_string(i);
    // Two transactions: rows a transaction inserted and deleted itself conflict with no snapshot.
    primary_->exec("CREATE TABLE " + table + " (a int)");
    primary_->exec("DROP TABLE " + table);
    primary_->exec("VACUUM pg_class, pg_attribute, pg_type, pg_depend");
    wait_replayed(*primary_, *standby_);
    conflicting = slot_column("conflicting") == "t";
    if (!conflicting) std::this_thread::sleep_for(500ms);
  }
  ASSERT_TRUE(conflicting) << "the standby did not invalidate the slot";
  const auto code = process->wait_exit(60s);
  const auto text = log_of(log);
  EXPECT_EQ(code, 10) << tail_of(log);
  EXPECT_NE(text.find("is invalidated"), std::string::npos) << text;
  EXPECT_NE(text.find("hot_standby_feedback = on"), std::string::npos) << text;
  std::cout << "standby conflict: slot invalidated ("
            << (standby_->server_major() >= 17 ? slot_column("invalidation_reason") : "conflicting")
            << "), pgoutbox exit " << code.value_or(-1) << "\n";
}

// The standby rebuilt from a new base backup has none of the old one's logical slots: pgoutbox,
// which streamed from it, does not create a new one silently (it would start at the current
// position) but ends with exit 11 and the fix.
TEST_F(StandbyTest, AStandbyRebuiltFromANewBaseBackupEndsPgoutboxAsItsSlotIsGone) {
  const auto log = dir_.path() + "/rebuilt.log";
  auto process = start_streaming("sb_rebuilt", 10, log);
  rebase_standby(*primary_, *standby_);
  const auto code = process->wait_exit(90s);
  EXPECT_EQ(code, 11) << tail_of(log);
  const auto text = log_of(log);
  EXPECT_NE(text.find("no longer exists on the server"), std::string::npos) << text;
  EXPECT_NE(text.find("re-publish"), std::string::npos) << text;
  EXPECT_EQ(slot_column("1"), "") << "pgoutbox created no slot on the rebuilt standby";
}
// A standby of the standby (cascading replication): the slot is created on the second one, which
// replays what the first relays; postgres.primary_dsn names the top of the chain, the only
// server that writes running-transactions records.
TEST_F(StandbyTest, ACascadedStandbyDecodesEveryRowThePrimaryCommits) {
  auto cascaded = make_standby(*standby_, "sb_cascaded", {{"hot_standby_feedback", "on"}});
  const auto log = dir_.path() + "/cascaded.log";
  auto cfg = write_config("sb_cascaded", primary_dsn_key());
  {
    std::ifstream in(cfg);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto at = text.find("port=" + std::to_string(standby_->port()));
    text.replace(at, 5 + std::to_string(standby_->port()).size(), "port=" + std::to_string(cascaded->port()));
    std::ofstream(cfg, std::ios::trunc) << text;
  }
  auto process = std::make_unique<PgoutboxProcess>(PGOUTBOX_BINARY, cfg, log);
  PGOUTBOX_ASSERT_EVENTUALLY(cascaded->query_value("SELECT active AND confirmed_flush_lsn IS NOT NULL FROM "
                                                   "pg_replication_slots WHERE slot_name = 'sb_slot'") == "t",
                             60s)
      << tail_of(log);
  insert_rows("cascaded-", 1000);
  PGOUTBOX_EXPECT_EVENTUALLY(keys_in(shared_kafka().bootstrap(), "sb_cascaded", 1000).size() >= 1000, 60s)
      << tail_of(log);
  process->signal(SIGTERM);
  EXPECT_EQ(process->wait_exit(30s), 0);
}
}  // namespace
}  // namespace pgoutbox::test
