// The cutover from the polling relay to pgoutbox (docs/migrating.md "Switching from a polling relay",
// scripts/cutover-demo.sh in short), with the real binaries: order-service writes orders and
// local_message rows, outbox-poller relays them and falls behind, pgoutbox starts with backfill
// status = 'NEW', the poller is killed with SIGKILL, and reconcile --cutover must find every row
// in the topic and no more duplicates than the rows the poller published after the switch.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <signal.h>

#include <regex>

#include "eventually.h"
#include "example_fixture.h"
#include "kafka_client.h"
#include "pgoutbox_config.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

// reconcile --cutover's summary line, as numbers.
struct CutoverFigures {
  long rows = -1, lost = -1, duplicates = -1, unmarked = -1, sent_after = -1, one_relay_twice = -1;
  long by_poller = -1, by_backfill = -1, by_stream = -1;
};

CutoverFigures parse_figures(const std::string& output) {
  static const std::regex line(
      R"(cutover: (\d+) rows, (\d+) lost, (\d+) duplicates \((\d+) unmarked batch, (\d+) sent after the snapshot, )"
      R"((\d+) one relay twice\); published by the poller (\d+), pgoutbox's backfill (\d+), its stream (\d+))");
  std::smatch m;
  CutoverFigures f;
  if (!std::regex_search(output, m, line)) return f;
  const auto n = [&](int i) { return std::stol(m[i].str()); };
  f = {n(1), n(2), n(3), n(4), n(5), n(6), n(7), n(8), n(9)};
  return f;
}

class CutoverScenarioTest : public ::testing::Test {
 protected:
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();
  ScratchDir dir{"cutover-test", std::nullopt};
  const std::string shop = "shop_cutover";
  const std::string stock = "stock_cutover";
  // Its own topics and group: the other scenario uses outbox.event.order on the same broker.
  const std::string prefix = "cutover.event.";
  const std::string topic = prefix + "order";

  std::int64_t value(const std::string& sql, const std::string& db) { return std::stoll(*pg.query_value(sql, db)); }
  std::int64_t rows_with(const std::string& status) {
    return value("SELECT count(*) FROM local_message WHERE status = '" + status + "'", shop);
  }

  ChildProcess start(std::vector<std::string> argv, const std::string& log) {
    return ChildProcess(
        {.argv = std::move(argv), .log_path = dir.path() + "/" + log, .run_as = std::nullopt, .extra_env = {}});
  }

  void TearDown() override {
    pg.drop_slot_when_free("cutover");
    pg.drop_slot_when_free("cutover_backfilling");
    pg.drop_slot_when_free("cutover_backfilled");
  }
};

TEST_F(CutoverScenarioTest, NothingIsLostAndOnlyThePollersLastRowsAreDoubled) {
  create_database(pg, shop, {"examples/sql/shop.sql", "examples/sql/local_message.sql"});
  create_database(pg, stock, {"examples/sql/stock.sql", "sql/consumer_log.sql"});
  pg.exec(
      "INSERT INTO stock (sku, initial, available) SELECT 'SKU-' || g, 100000, 100000 FROM generate_series(1, 20) g",
      stock);
  create_topic(kafka.bootstrap(), topic, 3);

  // Before: the poller relays (at most 50 rows per 500 ms) while orders come faster, so a
  // backlog of NEW rows builds up that only the backfill can relay once the poller is gone.
  auto consumer =
      start({STOCK_CONSUMER_BINARY, "--brokers", kafka.bootstrap(), "--dsn", pg.dsn(stock), "--topic", topic, "--group",
             "stock-cutover", "--backoff", "200ms,500ms,1s", "--stats-file", dir.path() + "/consumer.stats"},
            "consumer.log");
  auto poller = start(
      {OUTBOX_POLLER_BINARY, "--dsn", pg.dsn(shop) + " application_name=outbox-poller", "--brokers", kafka.bootstrap(),
       "--topic-prefix", prefix, "--batch", "50", "--interval", "500ms", "--kafka-property", "linger.ms=50"},
      "poller.log");
  auto order_service = start(
      {ORDER_SERVICE_BINARY, "--dsn", pg.dsn(shop), "--rate", "200", "--event-table", "local_message"}, "orders.log");
  PGOUTBOX_ASSERT_EVENTUALLY(rows_with("SENT") >= 200 && rows_with("NEW") >= 300, 30s);

  // Step 1: the publication and the preflight, the poller still running.
  pg.exec("CREATE PUBLICATION cutover FOR TABLE public.local_message WITH (publish = 'insert')", shop);
  PgoutboxConfig settings;
  settings.dsn = pg.dsn(shop);
  settings.slot = "cutover";
  settings.publication = "cutover";
  settings.create_publication = false;
  settings.status_interval = "500ms";
  settings.brokers = kafka.bootstrap();
  settings.tables.push_back(
      {.table = "public.local_message",
       .topic = prefix + "${aggregatetype}",
       .validate_json = false,
       .extra_yaml = "    backfill:\n      where: \"status = 'NEW'\"\n      order_by: created_at\n"});
  settings.extra_yaml = "provenance_headers: true\nshutdown_timeout: 10s\n";
  const auto config = write_pgoutbox_config(dir.path() + "/pgoutbox.yaml", settings);
  const auto check = run_to_end({PGOUTBOX_BINARY, "check", "-c", config}, dir.path() + "/check.log", 60s);
  ASSERT_EQ(check.exit_code, 0) << check.output;
  // SENT now is SENT in the slot's snapshot: pgoutbox never publishes those rows.
  const auto sent_before = rows_with("SENT");

  // Step 2: pgoutbox, its backfill, then the stream; the poller goes on beside it for a while.
  auto relay = start({PGOUTBOX_BINARY, "run", "-c", config}, "pgoutbox.log");
  PGOUTBOX_ASSERT_EVENTUALLY(
      pg.query_value("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'cutover'", shop) == "1", 60s);
  const auto sent_at_slot = rows_with("SENT");
  PGOUTBOX_ASSERT_EVENTUALLY(rows_with("SENT") >= sent_at_slot + 100, 30s);

  // Step 3: SIGKILL while the poller holds a claimed batch it is publishing or has published.
  const auto in_batch = [&] {
    return pg.query_value(
               "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'outbox-poller' AND "
               "state = 'idle in transaction'",
               shop) == "1";
  };
  // Generous: a 10 s wait failed once in a CI rehearsal while the loaded broker stalled for about
  // 10 s (librdkafka timed out its ApiVersionRequest); the poller claims its next batch after.
  PGOUTBOX_EXPECT_EVENTUALLY(in_batch(), 45s);
  poller.signal_group(SIGKILL);
  ASSERT_TRUE(poller.wait(10s));
  const auto orders_at_kill = value("SELECT count(*) FROM orders", shop);
  PGOUTBOX_ASSERT_EVENTUALLY(value("SELECT count(*) FROM orders", shop) >= orders_at_kill + 300, 30s);

  // Step 4: the orders stop, everything drains, reconcile.
  EXPECT_EQ(stop_gracefully(order_service, 30s), 0) << read_text(dir.path() + "/orders.log");
  const auto orders = value("SELECT count(*) FROM orders", shop);
  // A lost row never arrives: reconcile below says which.
  PGOUTBOX_EXPECT_EVENTUALLY(value("SELECT count(*) FROM consumer_log", stock) == orders, 30s);
  EXPECT_EQ(pg.query_value("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'cutover_backfilled'", shop),
            "1")
      << "the backfill did not finish";
  const auto result = run_to_end({RECONCILE_BINARY, "--cutover", "--orders-dsn", pg.dsn(shop), "--brokers",
                                  kafka.bootstrap(), "--topic", topic, "--stock-dsn", pg.dsn(stock)},
                                 dir.path() + "/reconcile.log", 60s);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  const auto f = parse_figures(result.output);
  EXPECT_EQ(f.rows, orders) << result.output;
  EXPECT_EQ(f.lost, 0) << result.output;
  // Each relay published each row at most once; a doubled row is one the poller published after
  // the check (its SENT mark not in the snapshot): never more than those.
  EXPECT_EQ(f.one_relay_twice, 0) << result.output;
  EXPECT_GT(f.duplicates, 0) << result.output;
  EXPECT_LE(f.duplicates, f.by_poller - sent_before) << result.output;
  EXPECT_GT(f.by_backfill, 0) << result.output;
  EXPECT_GT(f.by_stream, 0) << result.output;
  // The consumers are unaffected: every order took effect exactly once.
  EXPECT_NE(result.output.find(fmt::format("{} orders, {} applied, 0 lost, 0 applied twice", orders, orders)),
            std::string::npos)
      << result.output;
  EXPECT_EQ(stat_value(dir.path() + "/consumer.stats", "dead_lettered"), 0);
  RecordProperty("rows", static_cast<int>(f.rows));
  RecordProperty("duplicates", static_cast<int>(f.duplicates));
  std::printf(
      "cutover: %ld rows, %ld lost, %ld duplicates (%ld unmarked batch, %ld sent after the snapshot); "
      "the poller published %ld rows after the check\n",
      f.rows, f.lost, f.duplicates, f.unmarked, f.sent_after, f.by_poller - sent_before);

  EXPECT_EQ(stop_gracefully(consumer, 30s), 0) << read_text(dir.path() + "/consumer.log");
  EXPECT_EQ(stop_gracefully(relay, 30s), 0) << read_text(dir.path() + "/pgoutbox.log");
}

}  // namespace
}  // namespace pgoutbox::test
