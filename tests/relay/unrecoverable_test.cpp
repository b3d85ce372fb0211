// States that retrying cannot fix end the session with their own cause (and so their own exit
// code, relay/outcome.h) and a message that names the cause and the fix — never a crash, never
// a silent stall, never an endless reconnect loop (docs/spec.md "Operating it").
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "eventually.h"
#include "relay_config.h"
#include "relay_runner.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

config::Config base_config(const PgCluster& pg, const std::string& name) {
  return relay_config(pg.dsn(), shared_kafka().bootstrap(), name);
}

void create_outbox(const PgCluster& pg, const std::string& name) {
  pg.exec("CREATE TABLE " + name +
          " (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text NOT NULL, aggregateid text, "
          "type text, payload jsonb)");
}

relay::Outcome run_until_done(const config::Config& cfg) {
  RelayRunner relay(cfg);
  EXPECT_TRUE(eventually([&] { return relay.done(); }, 30s)) << "the session did not end";
  return relay.outcome();
}

void expect_fatal(const relay::Outcome& outcome, relay::Fatal cause, const std::string& says) {
  EXPECT_EQ(outcome.kind, relay::Outcome::Kind::fatal) << outcome.reason;
  EXPECT_EQ(static_cast<int>(outcome.cause), static_cast<int>(cause)) << outcome.reason;
  EXPECT_NE(outcome.reason.find(says), std::string::npos) << outcome.reason;
}

TEST(Unrecoverable, WalLevelNotLogical) {
  PgCluster pg(std::map<std::string, std::string>{{"wal_level", "replica"}});
  pg.start();
  create_outbox(pg, "wl");
  expect_fatal(run_until_done(base_config(pg, "wl")), relay::Fatal::wal_level, "wal_level");
}

TEST(Unrecoverable, WrongPassword) {
  PgCluster& pg = shared_postgres();
  create_outbox(pg, "pw");
  pg.exec("CREATE ROLE pw_user LOGIN REPLICATION PASSWORD 'right'; GRANT SELECT ON pw TO pw_user");
  {
    // Password authentication for this role only, ahead of the cluster's trust lines.
    const std::string hba = pg.data_dir() + "/pg_hba.conf";
    std::ifstream in(hba);
    const std::string rest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(hba, std::ios::trunc) << "host all pw_user 127.0.0.1/32 scram-sha-256\n"
                                        << "host replication pw_user 127.0.0.1/32 scram-sha-256\n"
                                        << rest;
    pg.exec("SELECT pg_reload_conf()");
  }
  auto cfg = base_config(pg, "pw");
  cfg.postgres.dsn = "host=127.0.0.1 port=" + std::to_string(pg.port()) + " dbname=postgres user=pw_user";
  cfg.postgres.create_publication = false;
  pg.exec("CREATE PUBLICATION pw_pub FOR TABLE pw");
  cfg.postgres.password = "wrong";
  const auto outcome = run_until_done(cfg);
  expect_fatal(outcome, relay::Fatal::authentication, "password authentication failed");
  EXPECT_EQ(outcome.reason.find("wrong"), std::string::npos) << "the password leaked into the message";
}

TEST(Unrecoverable, RoleWithoutReplication) {
  PgCluster& pg = shared_postgres();
  create_outbox(pg, "norepl");
  pg.exec(
      "CREATE ROLE norepl_user LOGIN; GRANT SELECT ON norepl TO norepl_user; CREATE PUBLICATION norepl_pub FOR TABLE "
      "norepl");
  auto cfg = base_config(pg, "norepl");
  cfg.postgres.dsn = "host=127.0.0.1 port=" + std::to_string(pg.port()) + " dbname=postgres user=norepl_user";
  cfg.postgres.create_publication = false;
  expect_fatal(run_until_done(cfg), relay::Fatal::permission, "replication");
}

TEST(Unrecoverable, OutboxTableDropped) {
  PgCluster& pg = shared_postgres();
  create_outbox(pg, "dropped");
  auto cfg = base_config(pg, "dropped");
  {
    RelayRunner first(cfg);  // creates the publication and the slot
  }
  pg.drop_slot_when_free(cfg.postgres.slot);
  pg.exec("DROP TABLE dropped");
  expect_fatal(run_until_done(cfg), relay::Fatal::table_missing, "dropped");
}

TEST(Unrecoverable, SlotInvalidatedByMaxSlotWalKeepSize) {
  PgCluster pg(std::map<std::string, std::string>{{"max_slot_wal_keep_size", "1MB"}});
  pg.start();
  create_outbox(pg, "lost");
  auto cfg = base_config(pg, "lost");
  {
    RelayRunner first(cfg);  // creates the slot, then leaves it inactive
  }
  // Well past what the slot may keep, then checkpoints remove the segments it needed.
  for (int i = 0; i < 4; ++i) {
    pg.exec("CREATE TABLE filler_" + std::to_string(i) +
            " AS SELECT g, repeat('x', 500) AS pad FROM generate_series(1, 40000) g");
    pg.exec("SELECT pg_switch_wal()");
    pg.exec("CHECKPOINT");
  }
  ASSERT_TRUE(eventually(
      [&] {
        return pg.query_value("SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'lost_slot'") == "lost";
      },
      30s))
      << "the slot was not invalidated";
  const auto outcome = run_until_done(cfg);
  expect_fatal(outcome, relay::Fatal::slot_invalidated, "invalidated");
  EXPECT_NE(outcome.reason.find("reconcile"), std::string::npos) << outcome.reason;
}

// Issue 12 #4: a slot that decodes prepared transactions is refused at start, with the fix,
// before anything is streamed from it.
TEST(Unrecoverable, TwoPhaseSlotIsRefused) {
  PgCluster& pg = shared_postgres();
  create_outbox(pg, "twophase");
  pg.exec("SELECT pg_create_logical_replication_slot('twophase_slot', 'pgoutput', false, true)");
  const auto outcome = run_until_done(base_config(pg, "twophase"));
  pg.drop_slot_when_free("twophase_slot");
  expect_fatal(outcome, relay::Fatal::slot_two_phase, "two_phase");
  EXPECT_NE(outcome.reason.find("recreate it without two_phase"), std::string::npos) << outcome.reason;
}

// Issue 12 #7: pgoutput reads publications as of the position it decodes, so a publication
// created for a slot that already exists stays missing for that slot: refuse, and create nothing.
TEST(Unrecoverable, PublicationIsNotCreatedForAnExistingSlot) {
  PgCluster& pg = shared_postgres();
  create_outbox(pg, "latepub");
  pg.exec("SELECT pg_create_logical_replication_slot('latepub_slot', 'pgoutput')");
  pg.exec("INSERT INTO latepub (aggregatetype, aggregateid, payload) VALUES ('E', 'k', '{}')");
  const auto outcome = run_until_done(base_config(pg, "latepub"));
  const auto created = pg.query_value("SELECT count(*) FROM pg_publication WHERE pubname = 'latepub_pub'");
  pg.drop_slot_when_free("latepub_slot");
  expect_fatal(outcome, relay::Fatal::publication, "drop the slot");
  EXPECT_EQ(created, "0");
}

// A role that needs a password and none is configured: libpq fails before the server answers
// (no SQLSTATE); on the first attempt that is permanent, with the fix.
TEST(Unrecoverable, MissingPassword) {
  PgCluster& pg = shared_postgres();
  create_outbox(pg, "nopw");
  pg.exec(
      "CREATE ROLE nopw_user LOGIN REPLICATION PASSWORD 'secret'; GRANT SELECT ON nopw TO nopw_user; "
      "CREATE PUBLICATION nopw_pub FOR TABLE nopw");
  {
    const std::string hba = pg.data_dir() + "/pg_hba.conf";
    std::ifstream in(hba);
    const std::string rest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(hba, std::ios::trunc) << "host all nopw_user 127.0.0.1/32 scram-sha-256\n"
                                        << "host replication nopw_user 127.0.0.1/32 scram-sha-256\n"
                                        << rest;
    pg.exec("SELECT pg_reload_conf()");
  }
  auto cfg = base_config(pg, "nopw");
  cfg.postgres.dsn = "host=127.0.0.1 port=" + std::to_string(pg.port()) + " dbname=postgres user=nopw_user";
  cfg.postgres.create_publication = false;
  ::setenv("PGPASSFILE", "/nonexistent", 1);  // no ~/.pgpass answers for it
  const auto outcome = run_until_done(cfg);
  expect_fatal(outcome, relay::Fatal::authentication, "no password supplied");
  EXPECT_NE(outcome.reason.find("Fix:"), std::string::npos) << outcome.reason;
}

// max_replication_slots exhausted when pgoutbox creates its slot (53400): permanent, with the fix.
TEST(Unrecoverable, NoFreeReplicationSlot) {
  PgCluster pg(std::map<std::string, std::string>{{"max_replication_slots", "1"}});
  pg.start();
  create_outbox(pg, "fullslots");
  pg.exec("SELECT pg_create_logical_replication_slot('someone_else', 'pgoutput')");
  const auto outcome = run_until_done(base_config(pg, "fullslots"));
  expect_fatal(outcome, relay::Fatal::slot_unusable, "max_replication_slots");
}

TEST(Unrecoverable, EachCauseHasItsOwnExitCode) {
  const std::vector<relay::Fatal> causes = {
      relay::Fatal::internal,      relay::Fatal::poison,        relay::Fatal::slot_invalidated,
      relay::Fatal::slot_unusable, relay::Fatal::publication,   relay::Fatal::table_missing,
      relay::Fatal::permission,    relay::Fatal::wal_level,     relay::Fatal::authentication,
      relay::Fatal::mapping,       relay::Fatal::kafka_config,  relay::Fatal::slot_two_phase,
      relay::Fatal::tls,           relay::Fatal::server_version};
  std::set<int> codes;
  for (const auto cause : causes) {
    const int code = relay::exit_code(cause);
    EXPECT_GE(code, 3);
    EXPECT_LT(code, 126);  // 126+ mean "not executable", "not found" and signals to shells
    codes.insert(code);
  }
  EXPECT_EQ(codes.size(), causes.size());
}

}  // namespace
}  // namespace pgoutbox::test
