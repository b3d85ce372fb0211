// A primary and a physical standby of PostgreSQL 17 on this machine, pgoutbox streaming through
// a multi-host DSN. The primary dies (SIGKILL, like a crash), the standby is promoted, and:
// - with postgres.failover_slot: true, pgoutbox reconnects to it by itself and resumes from the
//   slot the standby kept in sync: every outbox row the new primary holds reaches Kafka, and the
//   only repeats are a contiguous run of rows sent before the crash (the suffix confirmed after
//   the standby's last slot sync), each at most twice; `check` on the standby says the copy is
//   synced;
// - with failover_slot: false, `check` on the primary warns beforehand, the promoted standby has
//   no slot, and pgoutbox refuses to create one (exit 11) rather than skip what it had not
//   confirmed. Started again by hand it does create one (warning that the server was promoted),
//   and the test counts the rows a user loses that way.
// The base backup is taken with pg_backup_start()/pg_backup_stop() and a file copy (the npm
// server packages have no pg_basebackup).
#include <gtest/gtest.h>
#include <unistd.h>

#include <signal.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "../app/operator_fixture.h"
#include "eventually.h"
#include "kafka_client.h"
#include "pg_standby.h"
#include "pgoutbox_process.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

std::set<std::string> distinct_keys(const std::vector<ConsumedRecord>& records) {
  std::set<std::string> keys;
  for (const auto& r : records) keys.insert(r.key.value_or(""));
  return keys;
}

std::string log_of(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class FailoverTest : public ::testing::TestWithParam<bool> {};

TEST_P(FailoverTest, APromotedStandbyEitherResumesFromTheSynchronisedSlotOrIsRefused) {
  const bool failover_slot = GetParam();
  PgCluster primary(std::map<std::string, std::string>{{"hot_standby", "on"}});
  ASSERT_GE(primary.server_major(), 17) << "run with PGOUTBOX_TEST_PG_MAJOR=17 or later";
  KafkaBroker& kafka = shared_kafka();
  primary.exec("SELECT pg_create_physical_replication_slot('standby_slot', true)");
  primary.exec("ALTER SYSTEM SET synchronized_standby_slots = 'standby_slot'");
  primary.exec("SELECT pg_reload_conf()");
  primary.exec(
      "CREATE TABLE fo_outbox (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text NOT NULL, "
      "aggregateid text, type text, payload jsonb)");

  // The standby: a base backup of the primary streaming through standby_slot.
  const auto standby_cluster = make_standby(primary, "standby_slot",
                                            {{"hot_standby_feedback", "on"},
                                             {"sync_replication_slots", "on"},
                                             // The base backup copies the primary's postgresql.auto.conf; once
                                             // promoted, a synchronized_standby_slots naming a slot it lacks would
                                             // hold every logical walsender back for good.
                                             {"synchronized_standby_slots", ""}});
  PgCluster& standby = *standby_cluster;

  ScratchDir dir("failover", std::nullopt);
  const std::string dsn = "host=127.0.0.1,127.0.0.1 port=" + std::to_string(primary.port()) + "," +
                          std::to_string(standby.port()) +
                          " user=postgres dbname=postgres target_session_attrs=primary";
  PgoutboxConfig c;
  c.dsn = dsn;
  c.slot = "fo_slot";
  c.publication = "fo_pub";
  c.brokers = kafka.bootstrap();
  const std::string topic = failover_slot ? "fo_events" : "fo_events_unsynced";
  c.tables.push_back({.table = "public.fo_outbox", .topic = topic});
  c.extra_yaml = "reconnect:\n  min: 100ms\n  max: 1s\n";
  const auto cfg = write_pgoutbox_config(dir.path() + "/pgoutbox.yaml", c);
  const std::vector<std::string> env = {std::string("PGOUTBOX_POSTGRES_FAILOVER_SLOT=") +
                                        (failover_slot ? "true" : "false")};
  auto process = std::make_unique<PgoutboxProcess>(PGOUTBOX_BINARY, cfg, dir.path() + "/pgoutbox.log", env);
  PGOUTBOX_ASSERT_EVENTUALLY(
      primary.query_value("SELECT active FROM pg_replication_slots WHERE slot_name = 'fo_slot'") == "t", 60s);

  // A writer commits one row at a time through the same multi-host DSN, reconnecting as needed.
  std::atomic<bool> writing{true};
  std::atomic<int> committed{0};
  std::atomic<int> writing_row{0};  // the n of the row being written (row-n)
  std::thread writer([&] {
    const std::string write_dsn = dsn.substr(0, dsn.find(" target_session_attrs")) + " target_session_attrs=read-write";
    PGconn* conn = nullptr;
    for (int n = 0; writing; ++n) {
      writing_row = n;
      if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
        if (conn != nullptr) PQfinish(conn);
        conn = PQconnectdb(write_dsn.c_str());
        if (PQstatus(conn) != CONNECTION_OK) {
          std::this_thread::sleep_for(100ms);
          continue;
        }
      }
      const std::string sql = "INSERT INTO fo_outbox (aggregatetype, aggregateid, payload) VALUES ('E', 'row-" +
                              std::to_string(n) + "', '{}')";
      std::unique_ptr<PGresult, decltype(&PQclear)> res(PQexec(conn, sql.c_str()), &PQclear);
      if (PQresultStatus(res.get()) == PGRES_COMMAND_OK) ++committed;
      std::this_thread::sleep_for(5ms);
    }
    if (conn != nullptr) PQfinish(conn);
  });

  PgoutboxConfig on_standby = c;
  on_standby.dsn = "host=127.0.0.1 port=" + std::to_string(standby.port()) + " user=postgres dbname=postgres";
  const auto standby_cfg = write_pgoutbox_config(dir.path() + "/standby.yaml", on_standby);
  if (failover_slot) {
    // The standby holds a persistent, synchronised copy of the slot, and check says so there.
    PGOUTBOX_EXPECT_EVENTUALLY(standby.query_value("SELECT synced AND NOT temporary FROM pg_replication_slots WHERE "
                                                   "slot_name = 'fo_slot'") == "t",
                               90s);
    const auto check = run_pgoutbox(dir.path(), {"check", "-c", standby_cfg}, env);
    EXPECT_TRUE(check.printed("ok    slot fo_slot: failover = true, synced (this server is the standby)"))
        << check.output;
    // run there refuses the copy, which Postgres decodes only after a promotion, with the fix.
    PgoutboxProcess on_copy(PGOUTBOX_BINARY, standby_cfg, dir.path() + "/on-copy.log", env);
    EXPECT_EQ(on_copy.wait_exit(60s), 11) << tail_of(dir.path() + "/on-copy.log");
    EXPECT_NE(tail_of(dir.path() + "/on-copy.log").find("synchronised copy of the primary's failover slot"),
              std::string::npos)
        << tail_of(dir.path() + "/on-copy.log");
  } else {
    // Beside a standby's physical slot, check on the primary warns what a failover would cost.
    const auto check = run_pgoutbox(dir.path(), {"check", "-c", cfg}, env);
    EXPECT_NE(line_starting(check.output, "WARN  slot fo_slot: failover = false")
                  .find("events committed since the last confirmation would be lost on failover"),
              std::string::npos)
        << check.output;
  }
  PGOUTBOX_EXPECT_EVENTUALLY(committed > 300, 60s);
  const int before_crash = committed;
  primary.kill9();
  const int last_row_before_crash = writing_row;  // no row after it was committed on the old primary
  standby.exec("SELECT pg_promote(true, 60)");
  ASSERT_EQ(standby.query_value("SELECT pg_is_in_recovery()"), "f");
  PGOUTBOX_EXPECT_EVENTUALLY(committed > before_crash + 300, 60s);
  writing = false;
  writer.join();

  if (!failover_slot) {
    // The new primary has no slot: pgoutbox stops rather than create one past what it confirmed.
    EXPECT_EQ(process->wait_exit(60s), 11) << tail_of(dir.path() + "/pgoutbox.log");
    EXPECT_NE(log_of(dir.path() + "/pgoutbox.log").find("no longer exists on the server pgoutbox now reaches"),
              std::string::npos)
        << tail_of(dir.path() + "/pgoutbox.log");
    EXPECT_FALSE(standby.query_value("SELECT slot_name FROM pg_replication_slots WHERE slot_name = 'fo_slot'"));
    const auto left = std::stoul(*standby.query_value("SELECT count(*) FROM fo_outbox"));
    const auto relayed = distinct_keys(read_topic(kafka.bootstrap(), topic, 0, 10s)).size();
    // Started again, it creates a new slot at the current position, and says the server was
    // promoted; what was committed between its last confirmation and now never arrives.
    process = std::make_unique<PgoutboxProcess>(PGOUTBOX_BINARY, cfg, dir.path() + "/restarted.log", env);
    PGOUTBOX_ASSERT_EVENTUALLY(
        standby.query_value("SELECT active FROM pg_replication_slots WHERE slot_name = 'fo_slot'") == "t", 60s);
    PGOUTBOX_EXPECT_EVENTUALLY(
        log_of(dir.path() + "/restarted.log").find("the server is on timeline 2 (it was promoted") != std::string::npos,
        10s)
        << tail_of(dir.path() + "/restarted.log");
    standby.exec(
        "INSERT INTO fo_outbox (aggregatetype, aggregateid, payload) SELECT 'E', 'after-' || g, '{}' "
        "FROM generate_series(1, 100) g");
    const auto rows = std::stoul(*standby.query_value("SELECT count(*) FROM fo_outbox"));
    std::set<std::string> in_kafka;
    PGOUTBOX_EXPECT_EVENTUALLY(
        [&] {
          in_kafka = distinct_keys(read_topic(kafka.bootstrap(), topic, 0, 10s));
          return in_kafka.count("after-100") == 1;
        }(),
        60s);
    const auto lost = rows - in_kafka.size();
    std::cout << "failover without failover_slot: " << left << " rows on the new primary, " << relayed
              << " in Kafka when pgoutbox refused (exit 11), " << left - relayed
              << " to reconcile; restarted by hand it created a new slot: " << rows << " rows, " << in_kafka.size()
              << " in Kafka, " << lost << " lost\n";
    EXPECT_EQ(in_kafka.size(), relayed + 100) << "the new slot relays only the rows committed after it";
    EXPECT_GE(lost, 300U) << "the rows committed on the new primary before the new slot never arrive";
    process->signal(SIGTERM);
    EXPECT_EQ(process->wait_exit(30s), 0);
    return;
  }

  // Every row the new primary holds reaches Kafka; repeats only of rows sent before the crash.
  const auto rows = std::stoul(*standby.query_value("SELECT count(*) FROM fo_outbox"));
  std::set<std::string> in_kafka;
  std::size_t records = 0;
  const bool all = eventually(
      [&] {
        const auto got = read_topic(kafka.bootstrap(), topic, rows, 10s);
        records = got.size();
        in_kafka.clear();
        for (const auto& r : got) in_kafka.insert(r.key.value_or(""));
        return in_kafka.size() >= rows;
      },
      120s, 1s);
  const auto missing = standby.query_value("SELECT count(*) FROM fo_outbox WHERE aggregateid <> ALL (ARRAY['" + [&] {
    std::string list;
    for (const auto& k : in_kafka) list += (list.empty() ? "" : "','") + k;
    return list;
  }() + "'])");
  EXPECT_TRUE(all) << in_kafka.size() << " of " << rows << " rows in Kafka; pgoutbox's log:\n"
                   << tail_of(dir.path() + "/pgoutbox.log");
  EXPECT_EQ(missing, "0") << "rows the new primary holds that never reached Kafka";
  EXPECT_TRUE(process->running());
  // Repeats come only from the unconfirmed suffix: rows from before the crash, each sent at most
  // twice, forming one contiguous run.
  std::map<int, int> copies;
  for (const auto& r : read_topic(kafka.bootstrap(), topic, records, 10s)) {
    ++copies[std::stoi(r.key.value_or("row--1").substr(4))];
  }
  std::vector<int> repeated;
  for (const auto& [n, count] : copies) {
    EXPECT_LE(count, 2) << "row-" << n;
    if (count > 1) repeated.push_back(n);
  }
  if (!repeated.empty()) {
    EXPECT_LE(repeated.back(), last_row_before_crash) << "a row written after the promotion came twice";
    EXPECT_EQ(repeated.back() - repeated.front() + 1, static_cast<int>(repeated.size()))
        << "repeats are not one contiguous suffix: rows " << repeated.front() << ".." << repeated.back();
  }
  std::cout << "failover with failover_slot: " << rows << " rows on the new primary, " << in_kafka.size()
            << " distinct in Kafka, " << records - in_kafka.size() << " duplicates"
            << (repeated.empty()
                    ? std::string()
                    : " (rows " + std::to_string(repeated.front()) + ".." + std::to_string(repeated.back()) + " of " +
                          std::to_string(last_row_before_crash) + " written before the crash)")
            << ", " << *missing << " lost\n";
  process->signal(SIGTERM);
  EXPECT_EQ(process->wait_exit(30s), 0);
}

INSTANTIATE_TEST_SUITE_P(FailoverSlot, FailoverTest, ::testing::Bool(), [](const ::testing::TestParamInfo<bool>& p) {
  return p.param ? "failover_slot" : "no_failover_slot";
});

}  // namespace
}  // namespace pgoutbox::test
