// The throwaway Postgres is what pgoutbox needs: logical WAL, a pgoutput slot, a publication,
// fsync on, and (under root) a server that runs as an unprivileged account.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "services.h"

namespace pgoutbox::test {
namespace {

TEST(PostgresEnvironment, IsConfiguredForLogicalReplication) {
  auto& pg = shared_postgres();
  EXPECT_EQ(pg.query_value("SHOW wal_level"), "logical");
  EXPECT_EQ(pg.query_value("SHOW fsync"), "on");
  EXPECT_GE(std::stoi(*pg.query_value("SHOW max_replication_slots")), 10);
  EXPECT_GE(std::stoi(*pg.query_value("SHOW max_wal_senders")), 10);
  EXPECT_EQ(pg.query_value("SELECT split_part(current_setting('server_version'), '.', 1)"), "15");
  EXPECT_EQ(pg.query_value("SHOW listen_addresses"), "127.0.0.1");
}

TEST(PostgresEnvironment, ServerNeverRunsAsRoot) {
  auto& pg = shared_postgres();
  // The backend serving this connection: it lives as long as the connection stays open.
  auto conn = pg.connect();
  PGresult* res = PQexec(conn.get(), "SELECT pg_backend_pid()");
  ASSERT_EQ(PQresultStatus(res), PGRES_TUPLES_OK);
  const std::string pid = PQgetvalue(res, 0, 0);
  PQclear(res);
  struct stat st {};
  ASSERT_EQ(::stat(("/proc/" + pid).c_str(), &st), 0);
  EXPECT_NE(st.st_uid, 0U) << "a backend runs as root";
  if (::geteuid() != 0) {
    EXPECT_EQ(st.st_uid, ::geteuid());
  }
}

TEST(PostgresEnvironment, PgoutputSlotReadsAnInsertedRowBack) {
  auto& pg = shared_postgres();
  pg.exec(
      "CREATE TABLE env_outbox (id bigint PRIMARY KEY, payload jsonb NOT NULL);"
      "CREATE PUBLICATION env_pub FOR TABLE env_outbox WITH (publish = 'insert');");
  pg.exec("SELECT pg_create_logical_replication_slot('env_slot', 'pgoutput')");
  pg.exec(R"(INSERT INTO env_outbox VALUES (42, '{"marker": "ünïcode-7d1f"}'))");

  // The raw pgoutput bytes: Begin, Relation, Insert (carrying the row's text), Commit.
  const auto rows = pg.query(
      "SELECT encode(data, 'hex') FROM pg_logical_slot_get_binary_changes("
      "'env_slot', NULL, NULL, 'proto_version', '1', 'publication_names', 'env_pub')");
  ASSERT_EQ(rows.size(), 4U);
  const auto first_byte = [&](std::size_t i) { return rows[i][0]->substr(0, 2); };
  EXPECT_EQ(first_byte(0), "42");  // 'B'
  EXPECT_EQ(first_byte(1), "52");  // 'R'
  EXPECT_EQ(first_byte(2), "49");  // 'I'
  EXPECT_EQ(first_byte(3), "43");  // 'C'
  const auto hex_of = [](const std::string& text) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (const unsigned char c : text) {
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
    return out;
  };
  EXPECT_NE(rows[2][0]->find(hex_of("ünïcode-7d1f")), std::string::npos);
  EXPECT_NE(rows[1][0]->find(hex_of("env_outbox")), std::string::npos);

  // Consumed: the slot's confirmed position moved past it, and nothing is left.
  EXPECT_EQ(pg.query_value("SELECT count(*) FROM pg_logical_slot_peek_binary_changes("
                           "'env_slot', NULL, NULL, 'proto_version', '1', 'publication_names', 'env_pub')"),
            "0");
  pg.exec("SELECT pg_drop_replication_slot('env_slot')");
}

}  // namespace
}  // namespace pgoutbox::test
