// The demo's scenario in short, with the real binaries: order-service writes orders and their
// outbox events, pgoutbox relays them, stock-consumer applies them; Kafka is stopped while
// orders keep coming and started again; then reconciliation must find every order applied
// exactly once.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <fstream>

#include "eventually.h"
#include "example_fixture.h"
#include "kafka_client.h"
#include "pgoutbox_config.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

class ScenarioTest : public ::testing::Test {
 protected:
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();
  ScratchDir dir{"scenario-test", std::nullopt};
  const std::string shop = "shop_scenario";
  const std::string stock = "stock_scenario";

  std::int64_t value(const std::string& sql, const std::string& db) { return std::stoll(*pg.query_value(sql, db)); }
  std::int64_t orders() { return value("SELECT count(*) FROM orders", shop); }
  std::int64_t consumed() { return value("SELECT count(*) FROM consumer_log", stock); }

  Finished reconcile(const std::string& run) {
    return run_to_end({RECONCILE_BINARY, "--orders-dsn", pg.dsn(shop), "--stock-dsn", pg.dsn(stock)},
                      dir.path() + "/reconcile-" + run + ".log", 60s);
  }

  ChildProcess start(std::vector<std::string> argv, const std::string& log) {
    return ChildProcess(
        {.argv = std::move(argv), .log_path = dir.path() + "/" + log, .run_as = std::nullopt, .extra_env = {}});
  }
};

TEST_F(ScenarioTest, EveryOrderIsAppliedOnceAcrossAKafkaOutage) {
  create_database(pg, shop, {"examples/sql/shop.sql", "sql/outbox.sql", "sql/publication.sql"});
  create_database(pg, stock, {"examples/sql/stock.sql", "sql/consumer_log.sql"});
  pg.exec(
      "INSERT INTO stock (sku, initial, available) SELECT 'SKU-' || g, 100000, 100000 FROM generate_series(1, 20) g",
      stock);
  create_topic(kafka.bootstrap(), "outbox.event.order", 3);
  PgoutboxConfig settings;
  settings.dsn = pg.dsn(shop);
  settings.slot = "scenario";
  settings.publication = "pgoutbox";
  settings.create_publication = false;
  settings.status_interval = "500ms";
  settings.brokers = kafka.bootstrap();
  settings.tables.push_back({.table = "public.outbox", .topic = "", .validate_json = false, .extra_yaml = ""});
  settings.extra_yaml = "shutdown_timeout: 10s\n";
  const auto config = write_pgoutbox_config(dir.path() + "/pgoutbox.yaml", settings);

  auto relay = start({PGOUTBOX_BINARY, "run", "-c", config}, "pgoutbox.log");
  // The slot first: a logical slot decodes only what commits after its creation.
  PGOUTBOX_ASSERT_EVENTUALLY(
      pg.query_value("SELECT active FROM pg_replication_slots WHERE slot_name = 'scenario'") == "t", 30s);
  auto consumer = start({STOCK_CONSUMER_BINARY, "--brokers", kafka.bootstrap(), "--dsn", pg.dsn(stock), "--backoff",
                         "200ms,500ms,1s,2s,5s", "--stats-file", dir.path() + "/consumer.stats", "--kafka-property",
                         "reconnect.backoff.max.ms=1000"},
                        "consumer.log");
  auto order_service =
      start({ORDER_SERVICE_BINARY, "--dsn", pg.dsn(shop), "--rate", "50", "--seconds", "20"}, "orders.log");

  PGOUTBOX_ASSERT_EVENTUALLY(consumed() >= 100, 60s);
  kafka.stop();
  const auto before_outage = orders();
  // Orders are still accepted while Kafka is down: their events wait in the outbox's WAL.
  PGOUTBOX_EXPECT_EVENTUALLY(orders() >= before_outage + 150, 30s);
  const auto consumed_during_outage = consumed();
  kafka.start();

  const auto written = order_service.wait(60s);
  ASSERT_TRUE(written) << "order-service did not finish";
  EXPECT_TRUE(WIFEXITED(*written) && WEXITSTATUS(*written) == 0) << read_text(dir.path() + "/orders.log");
  const auto total = orders();
  EXPECT_GT(total, before_outage + 150);
  PGOUTBOX_ASSERT_EVENTUALLY(consumed() == total, 120s);
  EXPECT_GT(total, consumed_during_outage) << "the outage's orders were applied after Kafka came back";

  const auto clean = reconcile("clean");
  EXPECT_EQ(clean.exit_code, 0) << clean.output;
  EXPECT_NE(clean.output.find(fmt::format("{} orders, {} applied, 0 lost, 0 applied twice", total, total)),
            std::string::npos)
      << clean.output;
  EXPECT_EQ(stat_value(dir.path() + "/consumer.stats", "dead_lettered"), 0);

  EXPECT_EQ(stop_gracefully(consumer, 30s), 0) << read_text(dir.path() + "/consumer.log");
  EXPECT_EQ(stop_gracefully(relay, 30s), 0) << read_text(dir.path() + "/pgoutbox.log");

  // The safety net must be able to fail: an order written without its event (outside the
  // outbox pattern) is reported lost, and a movement applied twice is reported as such.
  const auto unrelayed = *pg.query_value("INSERT INTO orders (sku, quantity) VALUES ('SKU-1', 1) RETURNING id", shop);
  pg.exec(
      "INSERT INTO stock_movements (msg_id, order_id, sku, quantity, outcome) "
      "SELECT msg_id || '-again', order_id, sku, quantity, outcome FROM stock_movements ORDER BY id LIMIT 1",
      stock);
  const auto broken = reconcile("broken");
  EXPECT_EQ(broken.exit_code, 1) << broken.output;
  EXPECT_NE(broken.output.find(fmt::format("{} orders, {} applied, 1 lost, 1 applied twice", total + 1, total - 1)),
            std::string::npos)
      << broken.output;
  EXPECT_NE(broken.output.find("lost (never took effect): order " + unrelayed + " "), std::string::npos)
      << broken.output;
  pg.drop_slot_when_free("scenario");
}

}  // namespace
}  // namespace pgoutbox::test
