// Operators' predicates against a real PostgreSQL (issue 25 item 8; SECURITY.md "Backfill and
// republish predicates"), with the real pgoutbox binary: `republish --where`, `check` and `run`
// refuse a predicate that could reach past WHERE (...) before anything reaches the server; a
// literal holding ')' or ';' still works; PostgreSQL refuses what is not one boolean expression
// over the table; a slow predicate stops at tables[].backfill.statement_timeout.
#include <gtest/gtest.h>

#include <chrono>

#include "operator_fixture.h"
#include "pgoutbox_config.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

constexpr int kExitConfig = 2;
constexpr int kExitPostgres = 5;
constexpr int kExitUsage = 64;

class PredicateTest : public ::testing::Test {
 protected:
  PgCluster& pg = shared_postgres();
  ScratchDir dir{"predicate-test", std::nullopt};

  // Table `name` with 40 rows, a quarter SENT; no Kafka: every republish here is a dry run or
  // refused before it publishes.
  std::string write_config(const std::string& name, const std::string& table_yaml = "") {
    pg.exec("CREATE TABLE " + name +
            " (id bigserial PRIMARY KEY, aggregatetype text NOT NULL DEFAULT 'Order', aggregateid text, payload "
            "jsonb, status text NOT NULL DEFAULT 'NEW')");
    pg.exec("INSERT INTO " + name +
            " (aggregateid, payload, status) SELECT 'k' || g, jsonb_build_object('n', g), CASE WHEN g % 4 = 0 THEN "
            "'SENT' ELSE 'NEW' END FROM generate_series(1, 40) g");
    auto config = pipeline_config(pg.dsn(), "127.0.0.1:9", name);
    config.tables[0].extra_yaml = table_yaml;
    return write_pgoutbox_config(dir.path() + "/" + name + ".yaml", config);
  }

  CommandResult dry_run(const std::string& config, const std::string& table, const std::string& where) {
    return run_pgoutbox(dir.path(), {"republish", "-c", config, "--table", table, "--where", where, "--dry-run"});
  }
};

TEST_F(PredicateTest, RepublishRefusesWhatCouldReachPastWhereBeforeItConnects) {
  const auto config = write_config("pr_inject");
  for (const auto& [where, says] : std::vector<std::pair<std::string, std::string>>{
           {"true) UNION SELECT 1, 'x', 'y', '{}', 'z' --", "closes the parenthesis of WHERE"},
           {"1=1; DROP TABLE pr_inject", "has a ';' at byte 4"},
           {"status = 'NEW' /* ) OR (true */", "has a comment (/*)"},
           {"true UNION SELECT * FROM pr_inject", "set operation"},
       }) {
    const auto result = dry_run(config, "pr_inject", where);
    EXPECT_EQ(result.exit_code, kExitUsage) << where << "\n" << result.output;
    EXPECT_TRUE(result.printed("--where has")) << result.output;
    EXPECT_TRUE(result.printed(says)) << result.output;
    EXPECT_TRUE(result.printed("nothing was published")) << result.output;
  }
  EXPECT_EQ(pg.query_value("SELECT count(*) FROM pr_inject"), "40");
}

TEST_F(PredicateTest, LiteralsHoldingParenthesesAndSemicolonsStillWork) {
  const auto config = write_config("pr_literal");
  pg.exec("UPDATE pr_literal SET aggregateid = 'a); DROP TABLE x; --' WHERE id <= 3");
  const auto result = dry_run(config, "pr_literal", "aggregateid = 'a); DROP TABLE x; --' OR status = $$SENT)$$");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(result.printed("3 row(s) of public.pr_literal match")) << result.output;
  const auto escaped = dry_run(config, "pr_literal", "aggregateid = E'a); DROP TABLE x; --' AND (status = 'NEW')");
  EXPECT_EQ(escaped.exit_code, 0) << escaped.output;
  EXPECT_TRUE(escaped.printed("3 row(s) of public.pr_literal match")) << escaped.output;
}

// What passes the lexical check is still only an expression if PostgreSQL parses it as one, of
// type boolean, over the table's columns.
TEST_F(PredicateTest, PostgresRefusesWhatIsNotOneBooleanExpressionOverTheTable) {
  const auto config = write_config("pr_parse");
  for (const auto& [where, says] : std::vector<std::pair<std::string, std::string>>{
           {"1", "must be type boolean"},
           {"no_such_column = 1", "no_such_column"},
           {"true ORDER BY 1", "syntax error"},
       }) {
    const auto result = dry_run(config, "pr_parse", where);
    EXPECT_EQ(result.exit_code, kExitUsage) << where << "\n" << result.output;
    EXPECT_TRUE(result.printed("is refused by PostgreSQL")) << result.output;
    EXPECT_TRUE(result.printed(says)) << result.output;
  }
}

TEST_F(PredicateTest, ASlowPredicateStopsAtTheStatementTimeout) {
  const auto config = write_config("pr_slow", "    backfill:\n      statement_timeout: 1s\n");
  const auto started = std::chrono::steady_clock::now();
  // 40 rows × 5 s without the timeout.
  const auto result = dry_run(config, "pr_slow", "pg_sleep(5) IS NOT NULL");
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(result.exit_code, kExitPostgres) << result.output;
  EXPECT_TRUE(result.printed("statement timeout")) << result.output;
  EXPECT_TRUE(result.printed("tables[].backfill.statement_timeout is 1000ms")) << result.output;
  EXPECT_LT(took, 20s);
}

TEST_F(PredicateTest, CheckAndRunRefuseAnUnsafeBackfillPredicateAtLoad) {
  const auto config =
      write_config("pr_load", "    backfill:\n      where: \"true) UNION SELECT 1, 'x', 'y', '{}', 'z' --\"\n");
  for (const std::string command : {"check", "run"}) {
    const auto result = run_pgoutbox(dir.path(), {command, "-c", config}, {}, 30s);
    EXPECT_EQ(result.exit_code, kExitConfig) << command << "\n" << result.output;
    EXPECT_TRUE(result.printed("tables[0].backfill.where")) << result.output;
    EXPECT_TRUE(result.printed("closes the parenthesis of WHERE")) << result.output;
  }
}

}  // namespace
}  // namespace pgoutbox::test
