// `pgoutbox republish` as a process against a real Postgres and Kafka (issue 15 item 3): the
// count, a dry run that publishes nothing, the header on each record, the slot left alone.
#include <gtest/gtest.h>
#include <signal.h>

#include "eventually.h"
#include "kafka_client.h"
#include "operator_fixture.h"
#include "pgoutbox_config.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

class RepublishTest : public ::testing::Test {
 protected:
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();
  ScratchDir dir{"republish-test", std::nullopt};

  std::string write_config(const std::string& name) {
    pg.exec("CREATE TABLE " + name +
            " (id bigserial PRIMARY KEY, aggregatetype text NOT NULL DEFAULT 'Order', aggregateid text, payload "
            "jsonb, status text NOT NULL DEFAULT 'NEW')");
    pg.exec("INSERT INTO " + name +
            " (aggregateid, payload, status) SELECT 'k' || g, jsonb_build_object('n', g), CASE WHEN g % 4 = 0 THEN "
            "'SENT' ELSE 'NEW' END FROM generate_series(1, 400) g");
    return write_pgoutbox_config(dir.path() + "/" + name + ".yaml", pipeline_config(pg.dsn(), kafka.bootstrap(), name));
  }

  std::optional<std::string> slot_confirmed(const std::string& slot) {
    return pg.query_value("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = '" + slot +
                          "'");
  }
};

TEST_F(RepublishTest, CountsThenPublishesTheMatchingRowsWithTheHeaderAndLeavesTheSlotAlone) {
  const auto config = write_config("rp_rows");
  pg.exec("SELECT pg_create_logical_replication_slot('rp_rows_slot', 'pgoutput')");
  pg.exec("INSERT INTO rp_rows (aggregateid, payload) VALUES ('after-slot', '{}')");  // unconfirmed in the slot
  const auto before = slot_confirmed("rp_rows_slot");
  ASSERT_TRUE(before);

  const auto dry = run_pgoutbox(
      dir.path(), {"republish", "-c", config, "--table", "rp_rows", "--where", "status = 'SENT'", "--dry-run"});
  EXPECT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_TRUE(dry.printed("100 row(s) of public.rp_rows match WHERE (status = 'SENT')")) << dry.output;
  create_topic(kafka.bootstrap(), "rp_rows.Order", 2);
  EXPECT_TRUE(read_topic(kafka.bootstrap(), "rp_rows.Order", 0, 3s).empty()) << "a dry run published";

  const auto done =
      run_pgoutbox(dir.path(), {"republish", "-c", config, "--table", "rp_rows", "--where", "status = 'SENT'"});
  EXPECT_EQ(done.exit_code, 0) << done.output;
  EXPECT_TRUE(done.printed("100 row(s) of public.rp_rows match")) << done.output;
  const auto records = read_topic(kafka.bootstrap(), "rp_rows.Order", 100, 30s);
  ASSERT_EQ(records.size(), 100U);
  std::set<std::string> ids;
  for (const auto& r : records) {
    EXPECT_EQ(r.header("pgoutbox.republished"), "true");
    ids.insert(r.header("id").value_or(""));
  }
  EXPECT_EQ(ids.size(), 100U);
  const auto sent = pg.query("SELECT id::text FROM rp_rows WHERE status = 'SENT'");
  for (const auto& row : sent) EXPECT_EQ(ids.count(*row[0]), 1U) << *row[0];
  EXPECT_EQ(slot_confirmed("rp_rows_slot"), before);
  pg.drop_slot_when_free("rp_rows_slot");
}

TEST_F(RepublishTest, APredicatePostgresRefusesPublishesNothing) {
  const auto config = write_config("rp_bad");
  const auto result = run_pgoutbox(dir.path(), {"republish", "-c", config, "--table", "rp_bad", "--where", "nope = 1"});
  EXPECT_EQ(result.exit_code, 64) << result.output;
  EXPECT_TRUE(result.printed("is refused by PostgreSQL")) << result.output;
  // A second statement never reaches PostgreSQL (tests/security/predicate_test.cpp).
  const auto two =
      run_pgoutbox(dir.path(), {"republish", "-c", config, "--table", "rp_bad", "--where", "nope = 1; DROP TABLE x"});
  EXPECT_EQ(two.exit_code, 64) << two.output;
  EXPECT_TRUE(two.printed("--where has a ';'")) << two.output;
  const auto unknown = run_pgoutbox(dir.path(), {"republish", "-c", config, "--table", "other", "--where", "true"});
  EXPECT_EQ(unknown.exit_code, 64) << unknown.output;
  EXPECT_TRUE(unknown.printed("not a configured table")) << unknown.output;
}

}  // namespace
}  // namespace pgoutbox::test
