// Hostile text without services (issue 25 items 8 and 9; SECURITY.md):
//   - an operator's predicate cannot reach past WHERE (...): a ';', a comment, a ')' closing the
//     parenthesis or a set operation outside every parenthesis is refused, while the same
//     characters inside a literal are not;
//   - a predicate with any of them is a configuration error at load.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pgoutbox/config/loader.h"
#include "pgoutbox/config/predicate.h"

namespace pgoutbox::test {
namespace {

TEST(Predicate, WhatCouldReachPastTheParenthesisIsRefused) {
  for (const auto& [predicate, says] : std::vector<std::pair<std::string, std::string>>{
           {"true) UNION SELECT * FROM pg_authid --", "')' at byte 5"},
           {"1=1; DROP TABLE x", "';' at byte 4"},
           {"status = 'NEW' /*", "comment (/*)"},
           {"true -- ) UNION SELECT 1", "comment (--)"},
           {"true) OR (true", "')' at byte 5"},
           {"(true", "leaves 1 parenthesis open"},
           {"true UNION SELECT 1", "UNION at byte 6 outside every parenthesis"},
           {"true intersect select 1", "intersect at byte 6"},
           {"(SELECT true) EXCEPT (SELECT false)", "EXCEPT at byte 15"},
           {"id = $1", "parameter at byte 6"},
           {"status = 'NEW", "string constant at byte 10 that is never closed"},
           {"status = E'NEW\\') OR (1=1", "string constant at byte 10 that is never closed"},
           {"\"status = 'x'", "quoted identifier at byte 1"},
           {"status = $q$NEW", "dollar-quoted string at byte 10"},
           {"", "is empty"},
           {"  \n", "is empty"},
           {std::string("true\0) --", 9), "NUL byte"},
           // PostgreSQL reads a1e'…' as the identifier a1e and a plain string: the backslash ends
           // nothing, the ')' after the string closes WHERE's parenthesis.
           {"a1e'\\') UNION SELECT 1 --'", "')' at byte 7"},
       }) {
    EXPECT_NE(config::predicate_problem(predicate).find(says), std::string::npos)
        << predicate << " → " << config::predicate_problem(predicate);
  }
}

TEST(Predicate, TheSameCharactersInsideLiteralsAreAccepted) {
  for (const std::string predicate : {
           "status = 'NEW'",
           "aggregateid = 'a); DROP TABLE x; --'",
           "aggregateid = 'it''s ) ;'",
           "aggregateid = E'\\') ; --'",
           "aggregateid = e'x\\\\'",
           "aggregateid = $$ ) ; -- $$",
           "aggregateid = $tag$ $$ ) ;$tag$",
           "\"Status; ) --\" = 'x'",
           "a$b$ = 1 AND (x = 'y' OR (z IS NULL))",
           "id IN (SELECT id FROM t UNION SELECT 2)",
           "payload->>'note' LIKE '%(%'",
           "1e5 > 0.5e-3 AND .5 < 1",
           "status = U&'d\\0061t)a'",
       }) {
    EXPECT_EQ(config::predicate_problem(predicate), "") << predicate;
  }
}

TEST(Predicate, AnUnsafeBackfillPredicateIsAConfigurationError) {
  const std::string yaml =
      "postgres:\n  dsn: \"host=127.0.0.1 dbname=app\"\n  slot: s\n  publication: p\nkafka:\n  brokers: "
      "127.0.0.1:9092\ntables:\n  - table: public.outbox\n    backfill:\n      where: \"true) UNION SELECT 1 --\"\n";
  try {
    config::load_string(yaml, "outbox.yaml", config::Environment{});
    FAIL() << "loaded";
  } catch (const config::ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tables[0].backfill.where"), std::string::npos) << what;
    EXPECT_NE(what.find("closes the parenthesis of WHERE"), std::string::npos) << what;
  }
  const std::string fine =
      yaml.substr(0, yaml.find("where:")) + "where: \"aggregateid = ')'\"\n      statement_timeout: 2s\n";
  const auto cfg = config::load_string(fine, "outbox.yaml", config::Environment{});
  EXPECT_EQ(cfg.tables[0].backfill.where, "aggregateid = ')'");
  EXPECT_EQ(cfg.tables[0].backfill.statement_timeout, std::chrono::seconds(2));
}

}  // namespace
}  // namespace pgoutbox::test
