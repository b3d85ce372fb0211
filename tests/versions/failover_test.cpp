// A primary and a physical standby of PostgreSQL 17 on this machine, pgoutbox streaming through
// a multi-host DSN with postgres.failover_slot: true. The primary dies (SIGKILL, like a crash),
// the standby is promoted, and pgoutbox reconnects to it by itself and resumes from the slot
// the standby kept in sync: every outbox row the new primary holds reaches Kafka.
// The base backup is taken with pg_backup_start()/pg_backup_stop() and a file copy (the npm
// server packages have no pg_basebackup).
#include <gtest/gtest.h>
#include <unistd.h>

#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "eventually.h"
#include "kafka_client.h"
#include "pgoutbox_process.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

void run_shell(const std::string& command) { ASSERT_EQ(std::system(command.c_str()), 0) << command; }

TEST(FailoverTest, APromotedStandbyResumesFromTheSynchronisedSlotWithNothingLost) {
  PgCluster primary(std::map<std::string, std::string>{{"hot_standby", "on"}});
  ASSERT_GE(primary.server_major(), 17) << "run with PGOUTBOX_TEST_PG_MAJOR=17 or later";
  KafkaBroker& kafka = shared_kafka();
  primary.exec("SELECT pg_create_physical_replication_slot('standby_slot', true)");
  primary.exec("ALTER SYSTEM SET synchronized_standby_slots = 'standby_slot'");
  primary.exec("SELECT pg_reload_conf()");
  primary.exec(
      "CREATE TABLE fo_outbox (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text NOT NULL, "
      "aggregateid text, type text, payload jsonb)");

  // The standby: a cluster of its own (port, scratch directory), its data directory replaced by
  // a base backup of the primary.
  PgCluster standby(std::map<std::string, std::string>{
      {"hot_standby", "on"},
      {"hot_standby_feedback", "on"},
      {"sync_replication_slots", "on"},
      // The base backup copies the primary's postgresql.auto.conf; once promoted, a
      // synchronized_standby_slots naming a slot it lacks would hold every logical
      // walsender back for good.
      {"synchronized_standby_slots", ""},
      {"primary_slot_name", "standby_slot"},
      {"primary_conninfo", "host=127.0.0.1 port=" + std::to_string(primary.port()) +
                               " user=postgres dbname=postgres application_name=standby"}});
  standby.stop();
  {
    auto session = primary.connect();
    exec_on(session.get(), "SELECT pg_backup_start('pgoutbox failover test', true)");
    const std::string to = standby.data_dir();
    run_shell("find " + to + " -mindepth 1 -delete && cp -a " + primary.data_dir() + "/. " + to + "/ && rm -f " + to +
              "/postmaster.pid " + to + "/postmaster.opts && find " + to + "/pg_wal " + to +
              "/pg_replslot -mindepth 1 -delete && mkdir -p " + to + "/pg_wal/archive_status");
    std::unique_ptr<PGresult, decltype(&PQclear)> stop(
        PQexec(session.get(), "SELECT labelfile FROM pg_backup_stop(true)"), &PQclear);
    ASSERT_EQ(PQresultStatus(stop.get()), PGRES_TUPLES_OK) << PQerrorMessage(session.get());
    std::ofstream(to + "/backup_label") << PQgetvalue(stop.get(), 0, 0);
    std::ofstream(to + "/standby.signal");
    if (const auto account = service_account()) {
      run_shell("chown -R " + std::to_string(account->uid) + ":" + std::to_string(account->gid) + " " + to);
    }
  }
  standby.start();
  ASSERT_EQ(standby.query_value("SELECT pg_is_in_recovery()"), "t");

  ScratchDir dir("failover", std::nullopt);
  const std::string dsn = "host=127.0.0.1,127.0.0.1 port=" + std::to_string(primary.port()) + "," +
                          std::to_string(standby.port()) +
                          " user=postgres dbname=postgres target_session_attrs=primary";
  PgoutboxConfig c;
  c.dsn = dsn;
  c.slot = "fo_slot";
  c.publication = "fo_pub";
  c.brokers = kafka.bootstrap();
  c.tables.push_back({.table = "public.fo_outbox", .topic = "fo_events"});
  c.extra_yaml = "reconnect:\n  min: 100ms\n  max: 1s\n";
  const auto cfg = write_pgoutbox_config(dir.path() + "/pgoutbox.yaml", c);
  PgoutboxProcess process(PGOUTBOX_BINARY, cfg, dir.path() + "/pgoutbox.log", {"PGOUTBOX_POSTGRES_FAILOVER_SLOT=true"});
  PGOUTBOX_ASSERT_EVENTUALLY(
      primary.query_value("SELECT active FROM pg_replication_slots WHERE slot_name = 'fo_slot'") == "t", 60s);

  // A writer commits one row at a time through the same multi-host DSN, reconnecting as needed.
  std::atomic<bool> writing{true};
  std::atomic<int> committed{0};
  std::thread writer([&] {
    const std::string write_dsn = dsn.substr(0, dsn.find(" target_session_attrs")) + " target_session_attrs=read-write";
    PGconn* conn = nullptr;
    for (int n = 0; writing; ++n) {
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

  // The standby holds a persistent, synchronised copy of the slot.
  PGOUTBOX_EXPECT_EVENTUALLY(standby.query_value("SELECT synced AND NOT temporary FROM pg_replication_slots WHERE "
                                                 "slot_name = 'fo_slot'") == "t",
                             90s);
  PGOUTBOX_EXPECT_EVENTUALLY(committed > 300, 60s);
  const int before_crash = committed;
  primary.kill9();
  standby.exec("SELECT pg_promote(true, 60)");
  ASSERT_EQ(standby.query_value("SELECT pg_is_in_recovery()"), "f");
  PGOUTBOX_EXPECT_EVENTUALLY(committed > before_crash + 300, 60s);
  writing = false;
  writer.join();

  // Every row the new primary holds reaches Kafka; repeats only of rows sent before the crash.
  const auto rows = std::stoul(*standby.query_value("SELECT count(*) FROM fo_outbox"));
  std::set<std::string> in_kafka;
  std::size_t records = 0;
  const bool all = eventually(
      [&] {
        const auto got = read_topic(kafka.bootstrap(), "fo_events", rows, 10s);
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
  EXPECT_TRUE(process.running());
  std::cout << "failover: " << rows << " rows on the new primary, " << in_kafka.size() << " distinct in Kafka, "
            << records - in_kafka.size() << " duplicates, " << *missing << " lost\n";
  process.signal(SIGTERM);
  EXPECT_EQ(process.wait_exit(30s), 0);
}

}  // namespace
}  // namespace pgoutbox::test
