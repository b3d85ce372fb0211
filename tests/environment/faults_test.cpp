// The harness's fault controls do what fault tests rely on: each service can be stopped,
// crashed, frozen and brought back mid-test, keeping its data.
#include <gtest/gtest.h>

#include "eventually.h"
#include "kafka_client.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

bool pg_answers(const PgCluster& pg) {
  PgConnPtr conn(PQconnectdb((pg.dsn() + " connect_timeout=1").c_str()));
  if (PQstatus(conn.get()) != CONNECTION_OK) return false;
  PGresult* res = PQexec(conn.get(), "SELECT 1");
  const bool ok = PQresultStatus(res) == PGRES_TUPLES_OK;
  PQclear(res);
  return ok;
}

TEST(HarnessFaults, PostgresStopsCrashesFreezesAndComesBackWithItsData) {
  auto& pg = shared_postgres();
  pg.exec("CREATE TABLE fault_marker (v text); INSERT INTO fault_marker VALUES ('survives')");

  pg.stop(PgCluster::Stop::fast);
  EXPECT_FALSE(pg.running());
  EXPECT_FALSE(pg_answers(pg));
  pg.start();
  EXPECT_EQ(pg.query_value("SELECT v FROM fault_marker"), "survives");

  pg.kill9();
  EXPECT_FALSE(pg.running());
  EXPECT_FALSE(pg_answers(pg));
  pg.start();  // crash recovery replays the WAL
  EXPECT_EQ(pg.query_value("SELECT v FROM fault_marker"), "survives");

  pg.pause();
  EXPECT_FALSE(pg_answers(pg));
  pg.resume();
  PGOUTBOX_EXPECT_EVENTUALLY(pg_answers(pg), seconds(10));

  pg.restart(PgCluster::Stop::immediate);
  EXPECT_EQ(pg.query_value("SELECT v FROM fault_marker"), "survives");
}

TEST(HarnessFaults, KafkaStopsCrashesFreezesAndComesBackWithItsData) {
  auto& kafka = shared_kafka();
  const std::string topic = "fault-marker";
  create_topic(kafka.bootstrap(), topic, 1);
  {
    auto producer = make_client(RD_KAFKA_PRODUCER, {{"bootstrap.servers", kafka.bootstrap()}, {"acks", "all"}});
    const std::string value = "survives";
    ASSERT_EQ(rd_kafka_producev(producer.get(), RD_KAFKA_V_TOPIC(topic.c_str()),
                                RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
              RD_KAFKA_RESP_ERR_NO_ERROR);
    ASSERT_EQ(rd_kafka_flush(producer.get(), 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
  }

  kafka.pause();
  EXPECT_FALSE(kafka.answers_metadata(milliseconds(1500)));
  kafka.resume();
  PGOUTBOX_EXPECT_EVENTUALLY(kafka.answers_metadata(milliseconds(1000)), seconds(30));

  kafka.kill9();
  EXPECT_FALSE(kafka.running());
  EXPECT_FALSE(kafka.answers_metadata(milliseconds(1000)));
  kafka.start();
  auto records = read_topic(kafka.bootstrap(), topic, 1, seconds(60));
  ASSERT_EQ(records.size(), 1U);
  EXPECT_EQ(records[0].value, "survives");

  kafka.restart();
  records = read_topic(kafka.bootstrap(), topic, 1, seconds(60));
  ASSERT_EQ(records.size(), 1U);
  EXPECT_EQ(records[0].value, "survives");
}

}  // namespace
}  // namespace pgoutbox::test
