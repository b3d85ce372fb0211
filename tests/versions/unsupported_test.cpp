// PostgreSQL 13 (PGOUTBOX_TEST_PG_MAJOR=13): `run` and `check` refuse it with their own exit code
// and say why, instead of retrying a command the server cannot parse.
#include <gtest/gtest.h>

#include "../app/operator_fixture.h"
#include "pg_cluster.h"
#include "pgoutbox_process.h"

#include <fstream>
#include <sstream>

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

constexpr int kExitUnsupportedServer = 21;  // relay::Fatal::server_version, docs/operating.md "Exit codes"

TEST(UnsupportedServerTest, RunAndCheckRefusePostgres13WithTheirOwnCode) {
  PgCluster pg;
  ASSERT_EQ(pg.server_major(), 13) << "run with PGOUTBOX_TEST_PG_MAJOR=13";
  pg.exec("CREATE TABLE outbox (id uuid PRIMARY KEY, aggregatetype text, aggregateid text, type text, payload jsonb)");
  ScratchDir dir("unsupported", std::nullopt);
  PgoutboxConfig c;
  c.dsn = pg.dsn();
  c.slot = "old_slot";
  c.publication = "old_pub";
  c.brokers = "127.0.0.1:1";  // never reached: the server is refused first
  c.tables.push_back({.table = "public.outbox", .topic = "outbox"});
  const auto cfg = write_pgoutbox_config(dir.path() + "/pgoutbox.yaml", c);

  PgoutboxProcess run(PGOUTBOX_BINARY, cfg, dir.path() + "/run.log");
  EXPECT_EQ(run.wait_exit(60s), kExitUnsupportedServer);
  std::ifstream log(dir.path() + "/run.log");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_NE(text.str().find("PostgreSQL 13."), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("needs 14 or later"), std::string::npos) << text.str();
  EXPECT_FALSE(pg.query_value("SELECT slot_name FROM pg_replication_slots")) << "no slot on a refused server";

  const auto check = run_pgoutbox(dir.path(), {"check", "-c", cfg, "--kafka-timeout", "1"});
  EXPECT_EQ(check.exit_code, kExitUnsupportedServer) << check.output;
  const auto line = line_starting(check.output, "FAIL  postgres version");
  EXPECT_NE(line.find("PostgreSQL 13."), std::string::npos) << check.output;
  EXPECT_NE(line.find("Fix:"), std::string::npos) << check.output;
}

}  // namespace
}  // namespace pgoutbox::test
