// sql/ applied by psql to a real PostgreSQL 15, as an operator would: the outbox table, the
// publication, the least-privilege role, the consumer's idempotency table and the retention
// recipes. pgoutbox then runs as that role, and the role can read nothing but the outbox.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include "eventually.h"
#include "kafka_client.h"
#include "pgoutbox_config.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kDatabase = "sqlfiles";
constexpr const char* kRolePassword = "role-Secret-93ad1";

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class SqlFilesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    PgCluster& pg = shared_postgres();
    pg.exec(std::string("CREATE DATABASE ") + kDatabase);
    // The order of a fresh install; each file once, as the superuser.
    for (const char* file : {"outbox.sql", "publication.sql", "role.sql", "consumer_log.sql", "retention.sql"}) {
      const auto result = psql(pg, file, {"PGOUTBOX_ROLE_PASSWORD=" + std::string(kRolePassword)});
      ASSERT_EQ(result.first, 0) << file << ":\n" << result.second;
      ASSERT_EQ(result.second.find(kRolePassword), std::string::npos) << "psql echoed the password";
    }
    // A business table beside the outbox, which the role must not read.
    pg.exec("CREATE TABLE public.orders (id bigint PRIMARY KEY, total numeric)", kDatabase);
  }

  // Runs one file of sql/ with psql from the server's bindir; exit code and output.
  static std::pair<int, std::string> psql(PgCluster& pg, const std::string& file, std::vector<std::string> env = {},
                                          std::vector<std::string> extra_args = {}) {
    static int sequence = 0;
    ScratchDir scratch("psql", std::nullopt);
    const std::string log = scratch.path() + "/psql-" + std::to_string(++sequence) + ".log";
    std::vector<std::string> argv = {
        PGOUTBOX_PSQL, "-X",
        "-v",          "ON_ERROR_STOP=1",
        "-d",          "host=127.0.0.1 port=" + std::to_string(pg.port()) + " user=postgres dbname=" + kDatabase};
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    argv.push_back("-f");
    argv.push_back(std::string(PGOUTBOX_SQL_DIR) + "/" + file);
    ChildProcess process({.argv = argv, .log_path = log, .run_as = std::nullopt, .extra_env = std::move(env)});
    const auto status = process.wait(60s);
    const int code = status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
    return {code, read_text(log)};
  }

  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();
  ScratchDir dir{"sql-test", std::nullopt};

  std::string role_dsn() const {
    return "host=127.0.0.1 port=" + std::to_string(pg.port()) + " user=pgoutbox dbname=" + kDatabase;
  }

  // The server's answer to `sql` run as the pgoutbox role: "" on success, else the SQLSTATE.
  std::string as_role(const std::string& sql) const {
    PGconn* conn = PQconnectdb(role_dsn().c_str());
    std::string state = PQstatus(conn) == CONNECTION_OK ? "" : "connect";
    if (state.empty()) {
      PGresult* res = PQexec(conn, sql.c_str());
      const auto status = PQresultStatus(res);
      if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
        const char* code = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        state = code != nullptr ? code : "error";
      }
      PQclear(res);
    }
    PQfinish(conn);
    return state;
  }

  std::string write_config(const std::string& name, const std::string& slot, const std::string& publication,
                           const std::string& table) {
    auto config = pipeline_config(role_dsn(), kafka.bootstrap(), name);
    config.slot = slot;
    config.publication = publication;
    config.create_publication = false;
    config.tables.front().table = table;
    return write_pgoutbox_config(dir.path() + "/" + name + ".yaml", config);
  }

  ChildProcess start_pgoutbox(const std::vector<std::string>& args, const std::string& log) {
    std::vector<std::string> argv = {PGOUTBOX_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    return ChildProcess({.argv = argv,
                         .log_path = dir.path() + "/" + log,
                         .run_as = std::nullopt,
                         .extra_env = {"PGOUTBOX_POSTGRES_PASSWORD=" + std::string(kRolePassword)}});
  }

  static void stop(ChildProcess& process) {
    process.signal_leader(SIGTERM);
    const auto status = process.wait(30s);
    ASSERT_TRUE(status) << "pgoutbox did not stop";
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "status " << *status;
  }

  bool slot_active(const std::string& slot) {
    return pg.query_value("SELECT active FROM pg_replication_slots WHERE slot_name = '" + slot + "'") == "t";
  }
};

TEST_F(SqlFilesTest, TheRoleHasLoginAndReplicationAndNothingMore) {
  const auto row = pg.query(
      "SELECT rolcanlogin, rolreplication, rolsuper, rolcreatedb, rolcreaterole, rolbypassrls, "
      "rolinherit, rolpassword IS NOT NULL FROM pg_authid WHERE rolname = 'pgoutbox'");
  ASSERT_EQ(row.size(), 1U);
  const std::vector<std::optional<std::string>> expected = {"t", "t", "f", "f", "f", "f", "f", "t"};
  EXPECT_EQ(row[0], expected) << "login, replication, super, createdb, createrole, bypassrls, inherit, password";

  EXPECT_EQ(as_role("SELECT * FROM public.outbox"), "42501") << "pgoutbox reads the WAL, not the table";
  EXPECT_EQ(as_role("SELECT * FROM public.orders"), "42501");
  EXPECT_EQ(as_role("SELECT * FROM public.consumer_log"), "42501");
  EXPECT_EQ(as_role("INSERT INTO public.outbox (aggregatetype, aggregateid, type) VALUES ('a', 'b', 'c')"), "42501");
  EXPECT_EQ(as_role("DELETE FROM public.outbox"), "42501");
  EXPECT_EQ(as_role("CREATE TABLE public.sneaky (x int)"), "42501");
  EXPECT_EQ(as_role("CREATE PUBLICATION sneaky FOR TABLE public.outbox"), "42501");
}

TEST_F(SqlFilesTest, EveryFileRunsAgainWithoutAnError) {
  // A newcomer re-runs the whole install (the README's quickstart) after a mistake.
  for (const char* file : {"outbox.sql", "publication.sql", "consumer_log.sql", "retention.sql"}) {
    const auto again = psql(pg, file);
    EXPECT_EQ(again.first, 0) << file << ":\n" << again.second;
  }
  EXPECT_EQ(pg.query_value("SELECT count(*) FROM pg_publication_tables WHERE pubname = 'pgoutbox'", kDatabase), "1");
}

TEST_F(SqlFilesTest, RunningTheRoleFileAgainIsHarmless) {
  const auto again = psql(pg, "role.sql");
  EXPECT_EQ(again.first, 0) << again.second;
  // Without a password in the environment the existing one is kept.
  EXPECT_EQ(pg.query_value("SELECT rolpassword IS NOT NULL FROM pg_authid WHERE rolname = 'pgoutbox'"), "t");
  const auto other = psql(pg, "role.sql", {}, {"-v", "pgoutbox_role=relay_two"});
  EXPECT_EQ(other.first, 0) << other.second;
  EXPECT_EQ(pg.query_value("SELECT rolreplication FROM pg_roles WHERE rolname = 'relay_two'"), "t");
}

TEST_F(SqlFilesTest, PgoutboxRunsAsTheRoleAndItsCheckPasses) {
  const auto config = write_config("sqlrole", "sqlrole_slot", "pgoutbox", "public.outbox");
  auto check = start_pgoutbox({"check", "-c", config, "--kafka-timeout", "5"}, "check.log");
  const auto checked = check.wait(60s);
  const auto check_output = read_text(dir.path() + "/check.log");
  ASSERT_TRUE(checked && WIFEXITED(*checked)) << check_output;
  EXPECT_EQ(WEXITSTATUS(*checked), 0) << check_output;
  EXPECT_NE(check_output.find("ok    role pgoutbox: has REPLICATION"), std::string::npos) << check_output;
  EXPECT_EQ(check_output.find(kRolePassword), std::string::npos);

  auto run = start_pgoutbox({"run", "-c", config}, "run.log");
  PGOUTBOX_ASSERT_EVENTUALLY(slot_active("sqlrole_slot"), 30s);
  EXPECT_EQ(pg.query_value("SELECT usename FROM pg_stat_replication WHERE application_name = 'pgoutbox'"), "pgoutbox");
  pg.exec(
      "INSERT INTO public.outbox (aggregatetype, aggregateid, type, payload) "
      "SELECT 'order', 'o' || g, 'OrderPlaced', jsonb_build_object('n', g) FROM generate_series(1, 50) g",
      kDatabase);
  // Insert-then-delete (sql/outbox.sql, sql/retention.sql): the row is gone, the event is not.
  pg.exec(
      "BEGIN; INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
      "('00000000-0000-0000-0000-0000000000aa', 'order', 'gone', 'OrderPlaced', '{}'); "
      "DELETE FROM public.outbox WHERE id = '00000000-0000-0000-0000-0000000000aa'; COMMIT",
      kDatabase);
  const auto records = read_topic(kafka.bootstrap(), "sqlrole.order", 51, 60s);
  EXPECT_EQ(records.size(), 51U);
  bool saw_deleted_row = false;
  for (const auto& r : records) saw_deleted_row = saw_deleted_row || r.key == "gone";
  EXPECT_TRUE(saw_deleted_row);
  stop(run);
  ASSERT_TRUE(pg.drop_slot_when_free("sqlrole_slot"));
}

TEST_F(SqlFilesTest, ThePurgeProcedureDeletesOnlyOldRows) {
  pg.exec(
      "INSERT INTO public.outbox (aggregatetype, aggregateid, type, payload, created_at) "
      "SELECT 'purge', 'old' || g, 'T', '{}', now() - interval '30 days' FROM generate_series(1, 250) g;"
      "INSERT INTO public.outbox (aggregatetype, aggregateid, type, payload) "
      "SELECT 'purge', 'new' || g, 'T', '{}' FROM generate_series(1, 20) g",
      kDatabase);
  pg.exec("CALL pgoutbox_purge_outbox('7 days', 100)", kDatabase);
  EXPECT_EQ(pg.query_value("SELECT count(*) FROM public.outbox WHERE aggregatetype = 'purge'", kDatabase), "20");
  EXPECT_EQ(pg.query_value("SELECT count(*) FROM public.outbox WHERE aggregateid LIKE 'old%'", kDatabase), "0");
}

TEST_F(SqlFilesTest, DayPartitionsAreStreamedThroughTheRootAndDroppedWhenOld) {
  // The partitioned outbox exactly as sql/retention.sql describes it.
  pg.exec(
      "CREATE TABLE public.outbox_events (id uuid NOT NULL DEFAULT gen_random_uuid(), "
      "aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, "
      "payload jsonb, created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (id, created_at)) "
      "PARTITION BY RANGE (created_at);"
      "CREATE PUBLICATION outbox_events_pub FOR TABLE public.outbox_events "
      "WITH (publish = 'insert', publish_via_partition_root = true);"
      "GRANT SELECT ON public.outbox_events TO pgoutbox",
      kDatabase);
  EXPECT_EQ(pg.query_value("SELECT pgoutbox_add_day_partitions('public.outbox_events', 3)", kDatabase), "4");
  EXPECT_EQ(pg.query_value("SELECT pgoutbox_add_day_partitions('public.outbox_events', 3)", kDatabase), "0");
  // An old day, as if the job had run for a while.
  pg.exec(
      "CREATE TABLE public.outbox_events_20200101 PARTITION OF public.outbox_events "
      "FOR VALUES FROM ('2020-01-01 00:00+00') TO ('2020-01-02 00:00+00')",
      kDatabase);

  const auto config = write_config("sqlparts", "sqlparts_slot", "outbox_events_pub", "public.outbox_events");
  auto run = start_pgoutbox({"run", "-c", config}, "run-parts.log");
  PGOUTBOX_ASSERT_EVENTUALLY(slot_active("sqlparts_slot"), 30s);
  pg.exec(
      "INSERT INTO public.outbox_events (aggregatetype, aggregateid, type, payload, created_at) VALUES "
      "('evt', 'old', 'T', '{}', '2020-01-01 12:00+00'), ('evt', 'today', 'T', '{}', now()), "
      "('evt', 'tomorrow', 'T', '{}', now() + interval '1 day')",
      kDatabase);
  EXPECT_EQ(read_topic(kafka.bootstrap(), "sqlparts.evt", 3, 60s).size(), 3U);

  EXPECT_EQ(pg.query_value("SELECT pgoutbox_drop_day_partitions('public.outbox_events', '7 days')", kDatabase), "1");
  EXPECT_FALSE(pg.query_value("SELECT to_regclass('public.outbox_events_20200101')", kDatabase));
  // Streaming goes on after the drop.
  pg.exec(
      "INSERT INTO public.outbox_events (aggregatetype, aggregateid, type, payload) VALUES ('evt', 'after', 'T', '{}')",
      kDatabase);
  EXPECT_EQ(read_topic(kafka.bootstrap(), "sqlparts.evt", 4, 60s).size(), 4U);
  EXPECT_TRUE(run.running()) << read_text(dir.path() + "/run-parts.log");
  stop(run);
  ASSERT_TRUE(pg.drop_slot_when_free("sqlparts_slot"));
}

}  // namespace
}  // namespace pgoutbox::test
