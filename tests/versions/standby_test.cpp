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

  std::string write_config(const std::string& topic, const std::string& extra_postgres = "") {
    PgoutboxConfig c;
    c.dsn = standby_dsn();
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

  std::unique_ptr<PgCluster> primary_;
  std::unique_ptr<PgCluster> standby_;
  ScratchDir dir_{"standby", std::nullopt};
};

// The operator's first start against a new standby: the slot is created there, the rows the
// primary commits right after are published, a SIGKILL loses none, and after pg_promote() the
// same process goes on streaming from the slot that is now on the new primary.
TEST_F(StandbyTest, EveryRowIsPublishedFromTheFirstStartThroughAKillAndAPromotion) {
  const std::string topic = "sb_events";
  // The primary is idle here: without postgres.primary_dsn the creation would wait for its next
  // checkpoint (on 17 it did not end within 90 s).
  const auto cfg = write_config(topic, "  primary_dsn: \"" + primary_dsn() + "\"\n");
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
  const auto cfg = write_config(topic, ask_primary ? "  primary_dsn: \"" + primary_dsn() + "\"\n" : "");
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
}  // namespace
}  // namespace pgoutbox::test
