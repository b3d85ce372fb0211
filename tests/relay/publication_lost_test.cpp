// What pgoutbox says when the publication stopped carrying an outbox table while it streamed
// (relay/publication_watch.h, docs/spec.md I9): the exit code, the window and a republish
// command an operator can paste into a shell as it is.
#include <gtest/gtest.h>

#include "publication_watch.h"

namespace pgoutbox::relay {
namespace {

using Cause = replication::PublicationProblem::Cause;

// 2026-12-02 15:38:57.356234 UTC
constexpr std::int64_t kCommitted = 1796225937356234;

config::Config config_with(std::optional<std::string> timestamp_column = std::nullopt) {
  config::Config c;
  c.postgres.publication = "outbox_pub";
  config::TableConfig t;
  t.name = "outbox";
  t.columns.timestamp = std::move(timestamp_column);
  c.tables.push_back(t);
  return c;
}

PublicationLoss left_out(bool commit_timestamps) {
  PublicationLoss loss;
  loss.problem = {Cause::table_left_out,
                  "publication \"outbox_pub\" does not include table public.outbox: ALTER PUBLICATION outbox_pub ADD "
                  "TABLE \"public\".\"outbox\""};
  loss.tables = {{"public", "outbox"}};
  loss.commit_timestamps = commit_timestamps;
  return loss;
}

TEST(PublicationLostTest, NamesTheWindowFromTheLastRowLessASecondAndAReadyCommand) {
  const auto outcome = publication_lost(left_out(true), config_with(), {{{"public", "outbox"}, kCommitted, true}},
                                        "/etc/pgoutbox/pgoutbox.yaml");
  EXPECT_EQ(outcome.kind, Outcome::Kind::fatal);
  EXPECT_EQ(exit_code(outcome.cause), 12);
  const auto& text = outcome.reason;
  EXPECT_NE(text.find("ALTER PUBLICATION outbox_pub ADD TABLE \"public\".\"outbox\""), std::string::npos) << text;
  EXPECT_NE(text.find("public.outbox committed since 2026-12-02 15:38:56.356234+00 (the commit time of the last "
                      "transaction that brought a row of public.outbox in this session, less 1 s)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("pgoutbox republish -c /etc/pgoutbox/pgoutbox.yaml --table public.outbox --where "
                      "\"pg_catalog.pg_xact_commit_timestamp(xmin) >= '2026-12-02 15:38:56.356234+00'\""),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("track_commit_timestamp is off"), std::string::npos) << text;
}

TEST(PublicationLostTest, WithoutCommitTimestampsTheCommandReadsTheMappedTimestampColumn) {
  const auto outcome = publication_lost(left_out(false), config_with("created_at"),
                                        {{{"public", "outbox"}, kCommitted, false}}, "/srv/my config.yaml");
  const auto& text = outcome.reason;
  EXPECT_NE(text.find("when this session found public.outbox published at connect"), std::string::npos) << text;
  EXPECT_NE(text.find("track_commit_timestamp is off"), std::string::npos) << text;
  // The predicate quotes the column: single-quoted for the shell, its own quotes escaped.
  EXPECT_NE(text.find("pgoutbox republish -c \"/srv/my config.yaml\" --table public.outbox --where "
                      "'\"created_at\" >= '\\''2026-12-02 15:38:56.356234+00'\\'''"),
            std::string::npos)
      << text;
}

TEST(PublicationLostTest, ADroppedPublicationAsksForANewSlotAndNamesEveryTable) {
  auto config = config_with();
  config::TableConfig second;
  second.name = "outbox_2";
  config.tables.push_back(second);
  PublicationLoss loss;
  loss.problem = {Cause::missing, "publication \"outbox_pub\" does not exist"};
  loss.tables = {{"public", "outbox"}, {"public", "outbox_2"}};
  loss.commit_timestamps = true;
  const auto outcome = publication_lost(
      loss, config, {{{"public", "outbox"}, kCommitted, true}, {{"public", "outbox_2"}, kCommitted, false}}, "");
  const auto& text = outcome.reason;
  EXPECT_NE(text.find("drop the slot (pgoutbox slot drop -c FILE --yes)"), std::string::npos) << text;
  EXPECT_NE(text.find("pgoutbox republish -c FILE --table public.outbox --where"), std::string::npos) << text;
  EXPECT_NE(text.find("; pgoutbox republish -c FILE --table public.outbox_2 --where"), std::string::npos) << text;
}

}  // namespace
}  // namespace pgoutbox::relay
