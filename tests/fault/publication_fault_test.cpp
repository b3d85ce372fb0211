// The publication changed under a streaming pgoutbox (docs/spec.md I9, issue 24 item 8): the
// outbox table dropped from it, or `publish` without `insert`. pgoutput then leaves the rows
// committed since out of the stream and says nothing; pgoutbox must notice, exit with the
// publication's code, and name the window of rows the stream may have skipped with the
// `pgoutbox republish` command that sends them. The test follows that fix to the letter and
// asserts that every committed row ends in Kafka.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <csignal>
#include <thread>

#include "eventually.h"
#include "fault_fixture.h"
#include "kafka_client.h"
#include "operator_fixture.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The watch checks every 5 s; an exit within this bound says it noticed.
constexpr auto kExitBound = 30s;

// The text between `open` and the next `close` after it, or "".
std::string between(const std::string& text, const std::string& open, char close, std::size_t from = 0) {
  const auto start = text.find(open, from);
  if (start == std::string::npos) return "";
  const auto end = text.find(close, start + open.size());
  if (end == std::string::npos) return "";
  return text.substr(start + open.size(), end - start - open.size());
}

class PublicationFaultTest : public FaultTest {
 protected:
  KafkaBroker& kafka = shared_kafka();

  // The window's predicate reads commit times: the deployment a ready command asks for.
  static void SetUpTestSuite() {
    auto& cluster = shared_postgres();
    cluster.exec("ALTER SYSTEM SET track_commit_timestamp = on");
    cluster.restart();
  }

  std::uint64_t delivered(const Pipeline& p) {
    std::uint64_t n = 0;
    for (const auto& t : p.topics()) n += static_cast<std::uint64_t>(topic_record_count(kafka.bootstrap(), t));
    return n;
  }

  // The change under load, then the fix pgoutbox prints, step by step. `change` and `restore`
  // take the publication ({0}) and the table ({1}); `restore_said` is how the log names the restore.
  void change_publication_then_follow_the_fix(const std::string& name, const std::string& change,
                                              const std::string& restore, const std::string& restore_said) {
    const auto p = make_pipeline(name);
    for (const auto& t : p.topics()) create_topic(kafka.bootstrap(), t, 3);
    const auto config_path = write_config(name + ".yaml", config_for(p, kafka.bootstrap()));
    auto relay = start_pgoutbox(config_path);
    ASSERT_TRUE(wait_streaming(p, *relay)) << log_tail();

    auto writer_opts = writer_options(p);
    writer_opts.pause = 20ms;
    LoadWriter writers(writer_opts);
    writers.start();
    ASSERT_TRUE(eventually([&] { return !relay->running() || delivered(p) >= 100; }, 60s) && relay->running())
        << "nothing flows before the change:\n"
        << log_tail();

    // The change's own commit time, read back by its transaction id (track_commit_timestamp).
    auto conn = pg.connect();
    const auto exec = [&](const std::string& sql) {
      const std::unique_ptr<PGresult, decltype(&PQclear)> res(PQexec(conn.get(), sql.c_str()), &PQclear);
      const auto status = PQresultStatus(res.get());
      EXPECT_TRUE(status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) << sql << ": " << PQerrorMessage(conn.get());
      return PQntuples(res.get()) > 0 ? std::string(PQgetvalue(res.get(), 0, 0)) : std::string();
    };
    exec("BEGIN");
    exec(fmt::format(fmt::runtime(change), p.publication, p.table));
    const auto xid = exec("SELECT pg_current_xact_id()::text");
    exec("COMMIT");
    const auto changed_at = exec("SELECT pg_xact_commit_timestamp('" + xid + "'::xid)::text");
    const auto change_seen = Clock::now();

    const auto code = relay->wait_exit(kExitBound);
    const auto noticed_after = Clock::now() - change_seen;
    writers.stop();  // rows committed after the exit are in the window too
    ASSERT_EQ(code, 12) << "pgoutbox did not stop with the publication's code within "
                        << std::chrono::duration_cast<std::chrono::seconds>(kExitBound).count() << " s of the change:\n"
                        << log_tail();
    const auto log = log_tail();
    EXPECT_NE(log.find("Rows the stream may have skipped"), std::string::npos) << log;
    EXPECT_NE(log.find(fmt::format(fmt::runtime(restore_said), p.publication)), std::string::npos) << log;

    // The command as printed: --table WORD --where "PREDICATE".
    const auto command_at = log.find("pgoutbox republish -c " + config_path + " --table ");
    ASSERT_NE(command_at, std::string::npos) << log;
    const auto table = between(log, "--table ", ' ', command_at);
    const auto where = between(log, "--where \"", '"', command_at);
    const auto window_start = between(where, ">= '", '\'');
    ASSERT_EQ(table, "public." + p.table) << log;
    ASSERT_FALSE(window_start.empty()) << log;

    // The window starts no later than the first row the stream left out: every row committed
    // after the change is in it.
    const auto after_change = pg.query_value(
        fmt::format("SELECT count(*) FROM {} WHERE pg_xact_commit_timestamp(xmin) > '{}'", p.table, changed_at));
    const auto outside = pg.query_value(fmt::format(
        "SELECT count(*) FROM {} WHERE pg_xact_commit_timestamp(xmin) > '{}' AND pg_xact_commit_timestamp(xmin) < '{}'",
        p.table, changed_at, window_start));
    ASSERT_GT(std::stoll(after_change.value_or("0")), 0) << "no row committed after the change: nothing was tested";
    EXPECT_EQ(outside.value_or(""), "0") << "rows committed after the change (" << changed_at
                                         << ") before the window's start (" << window_start << ")";

    // The fix: restore the publication, start pgoutbox again, publish the window again.
    pg.exec(fmt::format(fmt::runtime(restore), p.publication, p.table));
    relay = start_pgoutbox(config_path, "pgoutbox-restarted.log");
    ASSERT_TRUE(wait_streaming(p, *relay)) << log_tail("pgoutbox-restarted.log");
    ASSERT_TRUE(wait_confirmed(p, current_wal_lsn(), 120s)) << log_tail("pgoutbox-restarted.log");
    const auto committed = writers.committed();
    const auto before_republish =
        audit_events(committed, read_until_complete(kafka.bootstrap(), p.topics(), committed, 5s));
    EXPECT_GT(before_republish.lost, 0U) << "the stream skipped nothing: the change did not take effect";

    const auto republished =
        run_pgoutbox(dir.path(), {"republish", "-c", config_path, "--table", table, "--where", where});
    EXPECT_EQ(republished.exit_code, 0) << republished.output;
    const auto report = audit_events(committed, read_until_complete(kafka.bootstrap(), p.topics(), committed, 120s));
    Figures(name)
        .add_ms("noticed_after", noticed_after)
        .add("skipped_by_the_stream", static_cast<double>(before_republish.lost))
        .add_audit(report);
    EXPECT_EQ(report.lost, 0U) << report.summary();
    relay->signal(SIGTERM);
    EXPECT_EQ(relay->wait_exit(60s), 0) << log_tail("pgoutbox-restarted.log");
  }
};

TEST_F(PublicationFaultTest, TheOutboxTableDroppedFromThePublicationStopsPgoutboxWithTheWindowToRepublish) {
  change_publication_then_follow_the_fix("pubdrop", "ALTER PUBLICATION {0} DROP TABLE {1}",
                                         "ALTER PUBLICATION {0} ADD TABLE {1}", "ALTER PUBLICATION {0} ADD TABLE");
}

TEST_F(PublicationFaultTest, APublicationNoLongerPublishingInsertsStopsPgoutboxWithTheWindowToRepublish) {
  change_publication_then_follow_the_fix("pubnoins", "ALTER PUBLICATION {0} SET (publish = 'update, delete')",
                                         "ALTER PUBLICATION {0} SET (publish = 'insert')",
                                         "ALTER PUBLICATION {0} SET (publish = 'insert')");
}

// The watch's query to a frozen server blocks its thread, never the session: a stop still ends
// pgoutbox, whose watch shuts its socket down instead of waiting for the answer. Only the watch's
// own backend is frozen (SIGSTOP): the stream goes on, so nothing else can hold the stop.
TEST_F(PublicationFaultTest, AStopWhileTheWatchWaitsOnAFrozenBackendIsNotHeldByIt) {
  const auto p = make_pipeline("pubfrozen");
  for (const auto& t : p.topics()) create_topic(kafka.bootstrap(), t, 3);
  auto config = config_for(p, kafka.bootstrap());
  config.extra_yaml = "shutdown_timeout: 2s\n";
  auto relay = start_pgoutbox(write_config("pubfrozen.yaml", config));
  ASSERT_TRUE(wait_streaming(p, *relay)) << log_tail();
  const auto watch_backend = [&] {
    return pg.query_value("SELECT pid::text FROM pg_stat_activity WHERE application_name LIKE '%-publication'");
  };
  PGOUTBOX_ASSERT_EVENTUALLY(watch_backend().has_value(), 30s);
  const pid_t backend = std::stoi(*watch_backend());
  ASSERT_EQ(::kill(backend, SIGSTOP), 0);
  std::this_thread::sleep_for(7s);  // time, not a condition: the next check's query meets the frozen backend
  relay->signal(SIGTERM);
  const auto code = relay->wait_exit(20s);
  ::kill(backend, SIGCONT);
  ASSERT_TRUE(code.has_value()) << "pgoutbox did not exit within 20 s of SIGTERM while its watch waited:\n"
                                << log_tail();
  EXPECT_EQ(*code, 0) << log_tail();
}

}  // namespace
}  // namespace pgoutbox::test
