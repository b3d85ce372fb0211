// `pgoutbox check -c FILE` against real Postgres and Kafka: one test per finding it claims to
// make, and a clean pass.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "eventually.h"

#include "kafka_client.h"
#include "operator_fixture.h"
#include "pgoutbox_config.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

// Where partition 0 of `topic` ends for a consumer of `isolation` (for read_committed, the last
// stable offset: before any transaction still open), and the records such a consumer reads.
struct PartitionView {
  std::int64_t end = -1;
  std::size_t records = 0;
};
PartitionView read_partition(const std::string& bootstrap, const std::string& topic, const std::string& isolation) {
  auto consumer = make_client(RD_KAFKA_CONSUMER, {{"bootstrap.servers", bootstrap},
                                                  {"group.id", "chk-rate-reader"},
                                                  {"enable.auto.commit", "false"},
                                                  {"enable.partition.eof", "true"},
                                                  {"isolation.level", isolation}});
  PartitionView view;
  std::int64_t low = 0;
  if (rd_kafka_query_watermark_offsets(consumer.get(), topic.c_str(), 0, &low, &view.end, 5000) !=
      RD_KAFKA_RESP_ERR_NO_ERROR) {
    ADD_FAILURE() << "no offsets for " << topic;
    return view;
  }
  std::unique_ptr<rd_kafka_topic_partition_list_t, decltype(&rd_kafka_topic_partition_list_destroy)> assignment(
      rd_kafka_topic_partition_list_new(1), &rd_kafka_topic_partition_list_destroy);
  rd_kafka_topic_partition_list_add(assignment.get(), topic.c_str(), 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
  EXPECT_EQ(rd_kafka_assign(consumer.get(), assignment.get()), RD_KAFKA_RESP_ERR_NO_ERROR);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  bool at_end = false;
  while (!at_end && std::chrono::steady_clock::now() < deadline) {
    rd_kafka_message_t* msg = rd_kafka_consumer_poll(consumer.get(), 200);
    if (msg == nullptr) continue;
    if (msg->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) at_end = true;
    if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR) ++view.records;
    rd_kafka_message_destroy(msg);
  }
  EXPECT_TRUE(at_end) << isolation << " did not reach the end of " << topic;
  rd_kafka_assign(consumer.get(), nullptr);
  return view;
}

// The number right after `marker` in `line`; -1 when there is none.
double number_after(const std::string& line, const std::string& marker) {
  const auto at = line.find(marker);
  if (at == std::string::npos) return -1;
  try {
    return std::stod(line.substr(at + marker.size()));
  } catch (const std::exception&) {
    return -1;
  }
}

class CheckCommandTest : public ::testing::Test {
 protected:
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();
  ScratchDir dir{"check-test", std::nullopt};

  // A Debezium-shaped outbox table with a publication of its own (as sql/ creates them).
  void create_outbox(const std::string& name, bool with_publication = true, PgCluster* cluster = nullptr) {
    PgCluster& on = cluster != nullptr ? *cluster : pg;
    on.exec("CREATE TABLE " + name +
            " (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text NOT NULL, aggregateid text NOT NULL, "
            "type text, payload jsonb)");
    if (with_publication)
      on.exec("CREATE PUBLICATION " + name + "_pub FOR TABLE " + name + " WITH (publish = 'insert')");
  }

  std::string write_config(const std::string& name, const std::string& dsn, const std::string& brokers,
                           const std::string& topic, const std::string& extra = "") {
    // Neither creates the publication nor sets a status interval: what `check` finds is the
    // database's own state.
    auto config = pipeline_config(dsn, brokers, name);
    config.create_publication = false;
    config.status_interval.clear();
    config.tables.front().topic = topic;
    config.extra_yaml = extra;
    return write_pgoutbox_config(dir.path() + "/" + name + ".yaml", config);
  }

  std::string write_config(const std::string& name, const std::string& topic = "${aggregatetype}.events") {
    return write_config(name, pg.dsn(), kafka.bootstrap(), topic);
  }

  CommandResult check(const std::string& config, std::vector<std::string> env = {}) {
    return run_pgoutbox(dir.path(), {"check", "-c", config, "--kafka-timeout", "3"}, std::move(env));
  }
};

TEST_F(CheckCommandTest, AWellConfiguredSetupPassesWithEveryCheckOk) {
  create_outbox("chk_clean");
  create_topic(kafka.bootstrap(), "chk_clean.events", 3);
  const auto result = check(write_config("chk_clean", "chk_clean.events"));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_FALSE(result.printed("FAIL")) << result.output;
  EXPECT_NE(line_starting(result.output, "ok    wal_level: logical"), "") << result.output;
  EXPECT_NE(line_starting(result.output, "ok    replication connection: opens"), "") << result.output;
  EXPECT_NE(line_starting(result.output, "ok    publication chk_clean_pub: exists and publishes inserts"), "")
      << result.output;
  EXPECT_NE(line_starting(result.output, "ok    table public.chk_clean: is in publication chk_clean_pub"), "")
      << result.output;
  EXPECT_NE(line_starting(result.output, "ok    table public.chk_clean: columns serve the mapping"), "")
      << result.output;
  EXPECT_NE(line_starting(result.output, "ok    slot chk_clean_slot: does not exist yet"), "") << result.output;
  EXPECT_NE(line_starting(result.output, "ok    table public.chk_clean: topic chk_clean.events exists (3 partitions)"),
            "")
      << result.output;
  EXPECT_NE(line_starting(result.output, "ready: "), "") << result.output;
}

TEST_F(CheckCommandTest, AMissingStaticTopicIsFineWhenTheBrokerCreatesTopics) {
  create_outbox("chk_autotopic");
  // The test broker runs with auto.create.topics.enable=true; check reads it from the broker.
  const auto result = check(write_config("chk_autotopic", "chk_autotopic.never.created"));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(line_starting(result.output,
                          "ok    table public.chk_autotopic: topic chk_autotopic.never.created does "
                          "not exist; the broker creates it on first use"),
            "")
      << result.output;
  // Looking the topic up by name did not create it.
  const auto again = check(write_config("chk_autotopic", "chk_autotopic.never.created"));
  EXPECT_TRUE(again.printed("topic chk_autotopic.never.created does not exist")) << again.output;
}

// docs/operating.md "Topic limits": a topic whose max.message.bytes is below the producer's
// batch.size is said, a warning under poison.policy stop (an oversized row would stop pgoutbox).
TEST_F(CheckCommandTest, ATopicLimitBelowTheBatchSizeIsAWarningUnderPolicyStop) {
  create_outbox("chk_limit");
  create_topic(kafka.bootstrap(), "chk_limit.events", 1, {{"max.message.bytes", "16384"}});
  const std::string line = "table public.chk_limit: topic chk_limit.events takes batches of at most 16384 bytes";
  const auto stop = check(write_config("chk_limit", "chk_limit.events"));
  EXPECT_EQ(stop.exit_code, 0) << stop.output;
  EXPECT_NE(line_starting(stop.output, "WARN  " + line), "") << stop.output;
  const auto dead_letter = check(write_config("chk_limit", pg.dsn(), kafka.bootstrap(), "chk_limit.events",
                                              "poison:\n  policy: dead-letter\n  dead_letter_topic: chk_limit.dlq\n"));
  EXPECT_EQ(dead_letter.exit_code, 0) << dead_letter.output;
  EXPECT_NE(line_starting(dead_letter.output, "ok    " + line), "") << dead_letter.output;
}

// docs/operating.md "Transaction timeout": in exactly-once, check compares the producer's
// transaction.timeout.ms with the broker's transaction.max.timeout.ms (900,000 ms by default):
// a larger one is refused by the coordinator, so check blocks on it.
TEST_F(CheckCommandTest, ExactlyOnceComparesTheTransactionTimeoutWithTheBrokersMaximum) {
  create_outbox("chk_txn");
  create_topic(kafka.bootstrap(), "chk_txn.events", 1);
  const std::string exactly_once = "delivery: exactly-once\n";
  const std::vector<std::string> key = {"PGOUTBOX_CHECKPOINT_SIGNING_KEY=" + std::string(32, 'k')};
  const auto fits = check(write_config("chk_txn", pg.dsn(), kafka.bootstrap(), "chk_txn.events", exactly_once), key);
  EXPECT_NE(line_starting(fits.output,
                          "ok    kafka transactions: a Postgres transaction must be published within "
                          "transaction.timeout.ms (60000 ms; the broker allows up to 900000 ms)"),
            "")
      << fits.output;
  auto above_env = key;
  above_env.emplace_back("PGOUTBOX_KAFKA_PROPERTY_TRANSACTION_TIMEOUT_MS=1000000");
  const auto above =
      check(write_config("chk_txn_above", pg.dsn(), kafka.bootstrap(), "chk_txn.events", exactly_once), above_env);
  EXPECT_NE(above.exit_code, 0) << above.output;
  EXPECT_NE(line_starting(above.output,
                          "FAIL  kafka transactions: the producer's transaction.timeout.ms (1000000 ms) is "
                          "above the broker's transaction.max.timeout.ms (900000 ms)"),
            "")
      << above.output;
  EXPECT_FALSE(above.printed("kafka transaction rate")) << "no transaction initialises: nothing to measure";
}

// docs/operating.md "Transaction timeout": in exactly-once, check measures how fast Kafka takes
// pgoutbox's records inside one Kafka transaction, written to the checkpoint topic and aborted,
// and says how long the largest Kafka transaction the in-flight caps allow takes at that rate.
// Nothing of it can ever be read as a checkpoint: a read_committed consumer (as pgoutbox's
// checkpoint reader is) reads none of the records a read_uncommitted one does.
TEST_F(CheckCommandTest, ExactlyOnceMeasuresTheTransactionRateInAKafkaTransactionItAborts) {
  create_outbox("chk_rate");
  create_topic(kafka.bootstrap(), "chk_rate.events", 1);
  const std::vector<std::string> key = {"PGOUTBOX_CHECKPOINT_SIGNING_KEY=" + std::string(32, 'k')};
  const auto cfg = write_config("chk_rate", pg.dsn(), kafka.bootstrap(), "chk_rate.events",
                                "delivery: exactly-once\ncheckpoint:\n  topic: chk_rate.checkpoints\n");
  // Without the checkpoint topic there is nothing to measure in, and check does not create it
  // (a producer's request would have the broker create it uncompacted).
  const auto before = check(cfg, key);
  EXPECT_NE(line_starting(before.output,
                          "WARN  kafka transaction rate: not measured: check measures it in checkpoint topic "
                          "chk_rate.checkpoints"),
            "")
      << before.output;
  EXPECT_EQ(read_topic(kafka.bootstrap(), "chk_rate.checkpoints", 0, 1s).size(), 0U);
  ASSERT_EQ(topic_record_count(kafka.bootstrap(), "chk_rate.checkpoints"), 0);

  create_topic(kafka.bootstrap(), "chk_rate.checkpoints", 1, {{"cleanup.policy", "compact"}});
  const auto result = check(cfg, key);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  const auto measured = line_starting(result.output, "ok    kafka transaction rate: at the rate measured (");
  ASSERT_NE(measured, "") << result.output;
  EXPECT_GT(number_after(measured, "at the rate measured ("), 0) << measured;
  // 16 MiB / 20,000 records: the average record the default caps imply.
  EXPECT_NE(measured.find(" records of 838 bytes acknowledged in "), std::string::npos) << measured;
  EXPECT_NE(measured.find("(limits.max_in_flight_records 20000 or limits.max_in_flight_bytes 16777216"),
            std::string::npos)
      << measured;
  EXPECT_NE(measured.find("within half of transaction.timeout.ms (60000 ms)"), std::string::npos) << measured;
  const auto largest = line_starting(
      result.output, "ok    kafka transaction rate: at that rate a single Postgres transaction of up to about ");
  EXPECT_GT(number_after(largest, "up to about "), 0) << result.output;

  // The coordinator writes the abort's marker after it answers the abort: until it is in, the
  // partition's end is one short of where read_committed will end (a local run met 5000 vs 5001).
  PGOUTBOX_EXPECT_EVENTUALLY(read_partition(kafka.bootstrap(), "chk_rate.checkpoints", "read_committed").end ==
                                 read_partition(kafka.bootstrap(), "chk_rate.checkpoints", "read_uncommitted").end,
                             10s)
      << "the probe's transaction is still open";
  const auto uncommitted = read_partition(kafka.bootstrap(), "chk_rate.checkpoints", "read_uncommitted");
  const auto committed = read_partition(kafka.bootstrap(), "chk_rate.checkpoints", "read_committed");
  EXPECT_GT(uncommitted.records, 100U) << "the probe wrote no records";
  EXPECT_EQ(committed.records, 0U) << "a read_committed reader sees the probe's records";
}

// With a short transaction.timeout.ms and the largest caps, the largest Kafka transaction takes
// more than half of it at the measured rate: a warning naming the figures, with the fix.
TEST_F(CheckCommandTest, ExactlyOnceWarnsWhenTheLargestKafkaTransactionTakesMoreThanHalfTheTimeout) {
  create_outbox("chk_rate_slow");
  create_topic(kafka.bootstrap(), "chk_rate_slow.events", 1);
  create_topic(kafka.bootstrap(), "chk_rate_slow.checkpoints", 1, {{"cleanup.policy", "compact"}});
  const std::vector<std::string> env = {"PGOUTBOX_CHECKPOINT_SIGNING_KEY=" + std::string(32, 'k'),
                                        "PGOUTBOX_KAFKA_PROPERTY_TRANSACTION_TIMEOUT_MS=5000"};
  const auto result = check(write_config("chk_rate_slow", pg.dsn(), kafka.bootstrap(), "chk_rate_slow.events",
                                         "delivery: exactly-once\ncheckpoint:\n  topic: chk_rate_slow.checkpoints\n"
                                         "limits:\n  max_in_flight_records: 1000000\n  max_in_flight_bytes: 1GiB\n"),
                            env);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  const auto warning = line_starting(result.output, "WARN  kafka transaction rate: at the rate measured (");
  ASSERT_NE(warning, "") << result.output;
  const double rate = number_after(warning, "at the rate measured (");
  EXPECT_GT(rate, 0) << warning;
  EXPECT_NE(warning.find("(limits.max_in_flight_records 1000000 or limits.max_in_flight_bytes 1073741824"),
            std::string::npos)
      << warning;
  const double takes = number_after(warning, "takes about ");
  EXPECT_GT(takes, 2500) << warning;
  EXPECT_NE(warning.find(takes > 5000 ? "more than transaction.timeout.ms (5000 ms): the coordinator aborts"
                                      : "more than half of transaction.timeout.ms (5000 ms)"),
            std::string::npos)
      << warning;
  EXPECT_NE(warning.find("Fix: raise kafka.properties.transaction.timeout.ms to "), std::string::npos) << warning;
  EXPECT_NE(warning.find("(the broker allows up to 900000 ms, its transaction.max.timeout.ms), or lower "
                         "limits.max_in_flight_records to "),
            std::string::npos)
      << warning;
  // What the timeout publishes at that rate: five seconds of it.
  const auto largest = line_starting(
      result.output, "ok    kafka transaction rate: at that rate a single Postgres transaction of up to about ");
  EXPECT_NEAR(number_after(largest, "up to about "), rate * 5, rate * 0.05 + 1) << result.output;
}

TEST_F(CheckCommandTest, WalLevelReplicaBlocksWithTheFix) {
  PgCluster replica_only(std::map<std::string, std::string>{{"wal_level", "replica"}});
  create_outbox("chk_wal", true, &replica_only);
  const auto result = check(write_config("chk_wal", replica_only.dsn(), kafka.bootstrap(), "chk_wal.events"));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  const auto line = line_starting(result.output, "FAIL  wal_level:");
  EXPECT_NE(line.find("is replica; logical decoding needs logical"), std::string::npos) << result.output;
  EXPECT_NE(line.find("ALTER SYSTEM SET wal_level = logical"), std::string::npos) << line;
  EXPECT_NE(line_starting(result.output, "blocked: "), "") << result.output;
}

TEST_F(CheckCommandTest, AMissingPublicationBlocksWithTheStatementThatCreatesIt) {
  create_outbox("chk_nopub", false);
  const auto result = check(write_config("chk_nopub"));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  const auto line = line_starting(result.output, "FAIL  publication chk_nopub_pub: does not exist.");
  EXPECT_NE(line, "") << result.output;
  EXPECT_NE(
      line.find("CREATE PUBLICATION \"chk_nopub_pub\" FOR TABLE \"public\".\"chk_nopub\" WITH (publish = 'insert')"),
      std::string::npos)
      << line;
}

// Issue 12 #7: with the slot in place `run` does not create a missing publication (it would be
// missing for every change the slot still decodes) and exits 12; `check` blocks on the same
// layout with the same fix, and passes it while the slot does not exist yet.
TEST_F(CheckCommandTest, APublicationPgoutboxWouldCreateForAnExistingSlotBlocksAsRunRefusesIt) {
  create_outbox("chk_latepub", false);
  auto settings = pipeline_config(pg.dsn(), kafka.bootstrap(), "chk_latepub");
  settings.status_interval.clear();
  settings.tables.front().topic = "chk_latepub.events";
  settings.log_format = "text";  // run's reason as written, not JSON-escaped
  const auto config = write_pgoutbox_config(dir.path() + "/chk_latepub.yaml", settings);
  const auto before = check(config);
  EXPECT_NE(line_starting(before.output, "ok    publication chk_latepub_pub: does not exist yet; pgoutbox creates it"),
            "")
      << before.output;

  pg.exec("SELECT pg_create_logical_replication_slot('chk_latepub_slot', 'pgoutput')");
  const auto result = check(config);
  const auto run = run_pgoutbox(dir.path(), {"run", "-c", config});
  const auto created = pg.query_value("SELECT count(*) FROM pg_publication WHERE pubname = 'chk_latepub_pub'");
  pg.drop_slot_when_free("chk_latepub_slot");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  const auto line = line_starting(result.output,
                                  "FAIL  publication chk_latepub_pub: does not exist, and replication slot "
                                  "\"chk_latepub_slot\" does: a publication created now would be missing");
  EXPECT_NE(line, "") << result.output;
  const std::string fix =
      "Fix: create the publication (CREATE PUBLICATION \"chk_latepub_pub\" FOR TABLE \"public\".\"chk_latepub\" "
      "WITH (publish = 'insert')), then drop the slot (pgoutbox slot drop -c FILE --yes) and let pgoutbox create it; "
      "or advance the slot past the publication's creation (SELECT pg_replication_slot_advance('chk_latepub_slot', "
      "pg_current_wal_lsn()))";
  EXPECT_NE(line.find(fix), std::string::npos) << line;
  EXPECT_EQ(run.exit_code, 12) << run.output;
  EXPECT_TRUE(run.printed(fix)) << run.output;
  EXPECT_EQ(created, "0");
}

TEST_F(CheckCommandTest, ATableOutsideThePublicationBlocks) {
  create_outbox("chk_notin", false);
  pg.exec("CREATE TABLE chk_notin_other (x int); CREATE PUBLICATION chk_notin_pub FOR TABLE chk_notin_other");
  const auto result = check(write_config("chk_notin"));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  const auto line = line_starting(result.output, "FAIL  table public.chk_notin: is not in publication chk_notin_pub.");
  EXPECT_NE(line.find("ALTER PUBLICATION \"chk_notin_pub\" ADD TABLE \"public\".\"chk_notin\""), std::string::npos)
      << result.output;
}

TEST_F(CheckCommandTest, APartitionedOutboxIsReportedWithAndWithoutViaRoot) {
  pg.exec(
      "CREATE TABLE chk_parts (id uuid DEFAULT gen_random_uuid(), aggregatetype text, aggregateid text, "
      "payload jsonb, created_at date NOT NULL DEFAULT current_date) PARTITION BY RANGE (created_at);"
      "CREATE TABLE chk_parts_all PARTITION OF chk_parts FOR VALUES FROM (MINVALUE) TO (MAXVALUE);"
      "CREATE PUBLICATION chk_parts_pub FOR TABLE chk_parts WITH (publish = 'insert')");
  auto result = check(write_config("chk_parts"));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(line_starting(result.output,
                          "ok    table public.chk_parts: is in publication chk_parts_pub, partitioned "
                          "(1 leaf")
                .find("under each leaf partition's name (no publish_via_partition_root): pgoutbox resolves each"),
            std::string::npos)
      << result.output;

  pg.exec("ALTER PUBLICATION chk_parts_pub SET (publish = 'insert', publish_via_partition_root = true)");
  result = check(write_config("chk_parts"));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(line_starting(result.output,
                          "ok    publication chk_parts_pub: exists and publishes inserts, via the "
                          "partition root"),
            "")
      << result.output;
  EXPECT_NE(line_starting(result.output, "ok    table public.chk_parts: is in publication").find("under the root"),
            std::string::npos)
      << result.output;
}

TEST_F(CheckCommandTest, InheritanceChildrenAreReportedAndOneThePublicationLeavesOutBlocks) {
  create_outbox("chk_inh");  // the publication is created here, before any child
  pg.exec("CREATE TABLE chk_inh_2026 () INHERITS (chk_inh)");
  auto result = check(write_config("chk_inh"));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(line_starting(result.output,
                          "FAIL  table public.chk_inh: has inheritance child public.chk_inh_2026 that "
                          "publication chk_inh_pub leaves out")
                .find("ALTER PUBLICATION \"chk_inh_pub\" ADD TABLE \"public\".\"chk_inh_2026\""),
            std::string::npos)
      << result.output;

  pg.exec("ALTER PUBLICATION chk_inh_pub ADD TABLE chk_inh_2026");
  result = check(write_config("chk_inh"));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(line_starting(result.output,
                          "ok    table public.chk_inh: is in publication chk_inh_pub; inheritance "
                          "children public.chk_inh_2026 arrive"),
            "")
      << result.output;
}

// Issue 12 #2: an inheritance child whose published columns cannot serve the mapping stops the
// relay (exit 17) when its first row arrives. `check` maps each member the publication sends
// under its own name as the relay does and blocks, in the relay's words; `run` refuses it at
// start, before any row.
TEST_F(CheckCommandTest, AFamilyMemberWhosePublishedColumnsCannotServeTheMappingBlocks) {
  if (std::stoi(pg.query_value("SHOW server_version_num").value_or("0")) < 150000)
    GTEST_SKIP() << "publication column lists arrived in PostgreSQL 15";
  create_outbox("chk_narrow");
  pg.exec(
      "CREATE TABLE chk_narrow_2026 () INHERITS (chk_narrow);"
      "ALTER PUBLICATION chk_narrow_pub ADD TABLE chk_narrow_2026 (id, aggregatetype)");
  const auto config = write_config("chk_narrow", "chk_narrow.events");
  const auto result = check(config);
  EXPECT_EQ(result.exit_code, 1) << result.output;
  const auto line =
      line_starting(result.output,
                    "FAIL  table public.chk_narrow: relation public.chk_narrow_2026 is a partition or "
                    "inheritance child of outbox table public.chk_narrow, and its rows cannot be mapped: ");
  EXPECT_NE(line.find("\"aggregateid\""), std::string::npos) << result.output;
  EXPECT_NE(line.find("Columns: id uuid, aggregatetype text."), std::string::npos) << line;
  EXPECT_NE(line.find("Fix: give public.chk_narrow_2026 the columns of public.chk_narrow"), std::string::npos) << line;

  const auto run = run_pgoutbox(dir.path(), {"run", "-c", config});
  EXPECT_EQ(run.exit_code, 17) << run.output;
  EXPECT_TRUE(run.printed("relation public.chk_narrow_2026 is a partition or inheritance child")) << run.output;

  // The column list dropped (the child comes in with the parent, whole), nothing blocks.
  pg.exec("ALTER PUBLICATION chk_narrow_pub SET TABLE chk_narrow");
  const auto fixed = check(config);
  EXPECT_EQ(fixed.exit_code, 0) << fixed.output;
  EXPECT_NE(line_starting(fixed.output,
                          "ok    table public.chk_narrow: the columns of the 1 partition(s) or inheritance child(ren) "
                          "published under their own names serve the mapping"),
            "")
      << fixed.output;
}

TEST_F(CheckCommandTest, AnAllTablesPublicationIsReportedAsSuch) {
  create_outbox("chk_every", false);
  pg.exec("CREATE PUBLICATION chk_every_pub FOR ALL TABLES WITH (publish = 'insert')");
  const auto result = check(write_config("chk_every"));
  pg.exec("DROP PUBLICATION chk_every_pub");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(line_starting(result.output,
                          "ok    table public.chk_every: is in FOR ALL TABLES publication "
                          "chk_every_pub"),
            "")
      << result.output;
}

TEST_F(CheckCommandTest, AMissingMappedColumnBlocksNamingTheColumnAndTheKey) {
  pg.exec(
      "CREATE TABLE chk_nocol (id uuid PRIMARY KEY, aggregatetype text, payload jsonb);"
      "CREATE PUBLICATION chk_nocol_pub FOR TABLE chk_nocol WITH (publish = 'insert')");
  const auto result = check(write_config("chk_nocol"));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  const auto line = line_starting(result.output, "FAIL  table public.chk_nocol:");
  EXPECT_NE(line.find("column \"aggregateid\" (the key) does not exist"), std::string::npos) << result.output;
  EXPECT_NE(line.find("tables[0].columns"), std::string::npos) << line;
}

TEST_F(CheckCommandTest, APayloadOfAnUnusableTypeBlocks) {
  pg.exec(
      "CREATE TABLE chk_badtype (id uuid PRIMARY KEY, aggregatetype text, aggregateid text, payload integer);"
      "CREATE PUBLICATION chk_badtype_pub FOR TABLE chk_badtype WITH (publish = 'insert')");
  const auto result = check(write_config("chk_badtype"));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  const auto line = line_starting(result.output, "FAIL  table public.chk_badtype:");
  EXPECT_NE(line.find("column \"payload\" (the payload)"), std::string::npos) << result.output;
  EXPECT_NE(line.find("payload integer"), std::string::npos) << line;
}

TEST_F(CheckCommandTest, ARoleWithoutReplicationBlocksButSelectIsNotNeeded) {
  create_outbox("chk_role");
  pg.exec("CREATE ROLE chk_weak LOGIN");
  const std::string dsn = "host=127.0.0.1 port=" + std::to_string(pg.port()) + " user=chk_weak dbname=postgres";
  const auto result = check(write_config("chk_role", dsn, kafka.bootstrap(), "chk_role.events"));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(line_starting(result.output, "FAIL  role chk_weak: lacks REPLICATION")
                .find("ALTER ROLE \"chk_weak\" REPLICATION"),
            std::string::npos)
      << result.output;
  // `run` streams without SELECT on the outbox (it reads the WAL), so check does not block on it.
  EXPECT_NE(line_starting(result.output, "ok    table public.chk_role: role chk_weak has no SELECT on it"), "")
      << result.output;

  // Given REPLICATION alone, nothing blocks any more: check and run agree.
  pg.exec("ALTER ROLE chk_weak REPLICATION");
  const auto fixed = check(write_config("chk_role", dsn, kafka.bootstrap(), "chk_role.events"));
  EXPECT_EQ(fixed.exit_code, 0) << fixed.output;
}

TEST_F(CheckCommandTest, AMetricsAddressInUseBlocksNamingTheKeyAndItsLine) {
  create_outbox("chk_port");
  // Something already listens there (as postgres_exporter does on 9187).
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string address = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  const auto config = write_config("chk_port", pg.dsn(), kafka.bootstrap(), "${aggregatetype}.events",
                                   "metrics_address: \"" + address + "\"\n");
  const auto result = check(config);
  ::close(listener);
  EXPECT_EQ(result.exit_code, 1) << result.output;
  const auto line = line_starting(result.output, "FAIL  metrics_address:");
  EXPECT_NE(line.find("cannot listen"), std::string::npos) << result.output;
  EXPECT_NE(line.find(config + ":10:18: metrics_address"), std::string::npos) << line;

  // Free, it is an ok line.
  const auto free = check(config);
  EXPECT_NE(line_starting(free.output, "ok    metrics_address: pgoutbox can listen on " + address), "") << free.output;
}

TEST_F(CheckCommandTest, ASlotOfAnotherPluginBlocks) {
  create_outbox("chk_plugin");
  pg.exec("SELECT pg_create_logical_replication_slot('chk_plugin_slot', 'test_decoding')");
  const auto result = check(write_config("chk_plugin"));
  pg.drop_slot_when_free("chk_plugin_slot");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(
      line_starting(result.output, "FAIL  slot chk_plugin_slot: uses plugin test_decoding; pgoutbox needs pgoutput."),
      "")
      << result.output;
}

// Issue 12 #4: `run` refuses a two_phase slot (exit 19), so `check` blocks on it, with the fix.
TEST_F(CheckCommandTest, ATwoPhaseSlotBlocks) {
  create_outbox("chk_twophase");
  pg.exec("SELECT pg_create_logical_replication_slot('chk_twophase_slot', 'pgoutput', false, true)");
  const auto result = check(write_config("chk_twophase"));
  pg.drop_slot_when_free("chk_twophase_slot");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  const auto line = line_starting(result.output, "FAIL  slot chk_twophase_slot: was created with two_phase = true");
  EXPECT_NE(line, "") << result.output;
  EXPECT_NE(line.find("recreate it without two_phase"), std::string::npos) << line;
}

TEST_F(CheckCommandTest, AnActiveSlotIsAWarningNamingItsPid) {
  create_outbox("chk_active");
  const auto config = write_config("chk_active");
  ChildProcess run({.argv = {PGOUTBOX_BINARY, "run", "-c", config},
                    .log_path = dir.path() + "/run.log",
                    .run_as = std::nullopt,
                    .extra_env = {}});
  const auto active_pid = [&] {
    return pg.query_value("SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'chk_active_slot'");
  };
  // The pid is read before and after the check: a relay that restarted its session in between
  // (a broker still electing the checkpoint topic's leader, say) streams from a new backend, and
  // the check is then run again rather than compared with a pid that is gone.
  std::string pid;
  CommandResult result;
  ASSERT_TRUE(eventually(
      [&] {
        const auto before = active_pid();
        if (!before) return false;
        result = check(config);
        pid = *before;
        return active_pid() == before;
      },
      std::chrono::seconds(60)));
  run.signal_leader(SIGTERM);
  run.wait(std::chrono::seconds(30));
  pg.drop_slot_when_free("chk_active_slot");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(line_starting(result.output, "WARN  slot chk_active_slot: is active (pid " + pid + ")"), "")
      << result.output << "\nthe relay's log:\n"
      << tail_of(dir.path() + "/run.log");
  EXPECT_NE(line_starting(result.output, "ok    slot chk_active_slot: confirmed "), "") << result.output;
}

TEST_F(CheckCommandTest, ASlotThatLostItsWalBlocksWithTheWayOut) {
  // A slot nobody reads, on a server that keeps at most 1 MB of WAL for slots: once enough WAL
  // has been written and a checkpoint removed the segments it needed, the slot is lost.
  PgCluster small(std::map<std::string, std::string>{{"max_slot_wal_keep_size", "1MB"}});
  create_outbox("chk_lost", true, &small);
  small.exec("SELECT pg_create_logical_replication_slot('chk_lost_slot', 'pgoutput')");
  ASSERT_TRUE(eventually(
      [&] {
        small.exec(
            "INSERT INTO chk_lost (aggregatetype, aggregateid, payload) SELECT 'E', 'k', '{}' "
            "FROM generate_series(1, 1000); SELECT pg_switch_wal(); CHECKPOINT");
        return small.query_value("SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'chk_lost_slot'") ==
               "lost";
      },
      std::chrono::seconds(60), std::chrono::milliseconds(10)));
  const auto result = check(write_config("chk_lost", small.dsn(), kafka.bootstrap(), "chk_lost.events"));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  const auto line = line_starting(result.output, "FAIL  slot chk_lost_slot: is invalidated (wal_status lost)");
  EXPECT_NE(line.find("pgoutbox slot drop -c FILE --yes"), std::string::npos) << result.output;
}

TEST_F(CheckCommandTest, UnreachableKafkaBlocks) {
  create_outbox("chk_nokafka");
  const std::string nowhere = "127.0.0.1:" + std::to_string(free_loopback_port());
  const auto result = check(write_config("chk_nokafka", pg.dsn(), nowhere, "chk_nokafka.events"));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  const auto line = line_starting(result.output, "FAIL  kafka: no broker at " + nowhere);
  EXPECT_NE(line, "") << result.output;
  EXPECT_NE(line.find("check kafka.brokers"), std::string::npos) << line;
  // The Postgres side is still fully checked.
  EXPECT_NE(line_starting(result.output, "ok    wal_level: logical"), "") << result.output;
}

TEST_F(CheckCommandTest, UnreachablePostgresBlocksAndKafkaIsStillChecked) {
  const std::string dsn = "host=127.0.0.1 port=" + std::to_string(free_loopback_port()) + " user=postgres";
  const auto result = check(write_config("chk_nopg", dsn, kafka.bootstrap(), "chk_nopg.events"));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(line_starting(result.output, "FAIL  postgres: cannot connect to PostgreSQL"), "") << result.output;
  EXPECT_NE(line_starting(result.output, "ok    kafka: "), "") << result.output;
}

TEST_F(CheckCommandTest, AnInvalidConfigurationExitsWithTheConfigCode) {
  const auto result = check(write_config("chk_badcfg", "chk.events") + ".missing");
  EXPECT_EQ(result.exit_code, 2) << result.output;
}

}  // namespace
}  // namespace pgoutbox::test
