// Hostile row values, part two (issue 25 items 3 and 4; SECURITY.md "Row values"), against the
// real pgoutbox binary and Postgres, with librdkafka's mock cluster as Kafka:
//   - a header name with a NUL byte, from a `json` headers column, cannot spoof `id`: not on the
//     first send, and not on the record pgoutbox rebuilds from the failed delivery report
//     (rd_kafka_header_get_all gives names as C strings) and sends again; a NUL byte in a value
//     makes the row poison;
//   - a 200 MB headers value and a 200 MB message envelope are poison without being parsed, and
//     the relay's peak RSS (VmHWM) stays within the copies libpq must hold plus 128 MiB.
#include <gtest/gtest.h>

#include "eventually.h"
#include "fault_fixture.h"
#include "kafka_client.h"
#include "mock_kafka.h"
#include "process_memory.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

// What the relay may hold beyond the message itself: libpq keeps a whole CopyData message in its
// input buffer, and PQgetCopyData returns it in a second allocation, so a 200 MB row costs two
// 200 MB buffers whatever pgoutbox does with it. Parsing the value would add ≈13 bytes per byte.
constexpr std::uint64_t kValueBytes = 200ULL << 20;
constexpr std::uint64_t kAllowedBeyondCopies = 128ULL << 20;

class RowValuesTest : public FaultTest {
 protected:
  MockKafkaCluster mock{1};

  // A table `<name>_outbox` with a `json` headers column (jsonb refuses "\u0000", json keeps it),
  // routed to `<name>.<aggregatetype>`, poison dead-lettered to `dlq-<name>` (out of the template's reach: a reserved
  // topic); no checkpoint topic, so the outbox's records are the only Produce requests the mock sees.
  std::string setup(const std::string& name, const std::string& extra_yaml = "") {
    pg.exec("CREATE TABLE " + name +
            "_outbox (id text PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT "
            "NULL, payload jsonb, headers json)");
    for (const auto& topic : {name + ".E", "dlq-" + name}) mock.create_topic(topic, 1, 1);
    auto config = pipeline_config(pg.dsn(), mock.bootstrap(), name);
    config.tables.front().table = "public." + name + "_outbox";
    config.tables.front().extra_yaml = "    columns:\n      headers: headers\n";
    config.kafka_properties = {{"linger.ms", "5"}};
    config.log_format = "text";
    config.extra_yaml = "poison:\n  policy: dead-letter\n  dead_letter_topic: dlq-" + name +
                        "\n  max_retries: 2\n  retry_backoff: 100ms\ncheckpoint:\n  enabled: false\n" + extra_yaml;
    return write_config(name + ".yaml", config);
  }

  std::unique_ptr<PgoutboxProcess> start(const std::string& name, const std::string& config) {
    auto relay = start_pgoutbox(config, name + ".log");
    const bool streaming = eventually(
        [&] {
          return !relay->running() || (slot_active_pid(pg.dsn(), name + "_slot").has_value() &&
                                       slot_confirmed_lsn(pg.dsn(), name + "_slot").has_value());
        },
        60s);
    if (!streaming || !relay->running())
      throw std::runtime_error("pgoutbox did not stream:\n" + log_tail(name + ".log"));
    return relay;
  }

  void insert(const std::string& name, const std::string& id, const std::string& headers_sql) {
    pg.exec("INSERT INTO " + name + "_outbox VALUES ('" + id + "', 'E', 'k-" + id + "', 'Created', '{}', " +
            headers_sql + ")");
  }

  // VmHWM of the relay, the kernel's own peak of its resident size since it started.
  static std::uint64_t peak_rss(PgoutboxProcess& relay) {
    const auto memory = read_process_memory(relay.pid());
    return memory ? memory->hwm : 0;
  }
  static std::uint64_t rss(PgoutboxProcess& relay) {
    const auto memory = read_process_memory(relay.pid());
    return memory ? memory->rss : 0;
  }
};

std::size_t count_headers(const ConsumedRecord& record, const std::string& name) {
  std::size_t n = 0;
  for (const auto& [key, value] : record.headers) n += key == name ? 1 : 0;
  return n;
}

TEST_F(RowValuesTest, ANulInAHeaderNameCannotSpoofIdOnTheRecordSentAgainAfterAFailedDelivery) {
  const std::string name = "sec_nul";
  auto relay = start(name, setup(name));

  // The next two Produce requests are refused for good: the batched send's delivery report comes
  // back failed, pgoutbox sends the record again alone, rebuilt from that report's headers; that
  // send is refused too (which pgoutbox logs), and the record rebuilt once more goes through.
  mock.fail_produce_on(1, {{RD_KAFKA_RESP_ERR_INVALID_RECORD, 0}, {RD_KAFKA_RESP_ERR_INVALID_RECORD, 0}});
  insert(name, "nul-1", R"('{"id\u0000": "SPOOFED", "traceparent": "00-abc-def-01"}'::json)");

  const auto records = read_topic(mock.bootstrap(), name + ".E", 1, 60s);
  ASSERT_EQ(records.size(), 1U) << log_tail(name + ".log");
  EXPECT_EQ(mock.pending_produce_errors(1), 0U);
  const auto log = log_tail(name + ".log");
  EXPECT_NE(log.find("Kafka refused the record (INVALID_RECORD"), std::string::npos)
      << "the record was not sent again after a failed delivery:\n"
      << log;
  const auto& sent = records.front();
  EXPECT_EQ(count_headers(sent, "id"), 1U) << "one id header on the record sent again";
  EXPECT_EQ(sent.header("id"), "nul-1");
  for (const auto& [key, value] : sent.headers) EXPECT_NE(value, "SPOOFED") << "header " << key;
  EXPECT_EQ(sent.header("traceparent"), "00-abc-def-01") << "other headers pass";

  // A NUL in a value is refused, never sent.
  insert(name, "nul-2", R"('{"tenant": "acme\u0000other"}'::json)");
  const auto dead = read_topic(mock.bootstrap(), "dlq-" + name, 1, 60s);
  ASSERT_EQ(dead.size(), 1U) << log_tail(name + ".log");
  EXPECT_EQ(dead[0].header("id"), "nul-2");
  EXPECT_EQ(dead[0].header("pgoutbox.dlq.error.code"), "INVALID_HEADERS");
  EXPECT_FALSE(dead[0].header("tenant")) << "the dead-letter copy does not carry the value either";
  EXPECT_TRUE(relay->running());
  Figures("header_name_nul").add("id_headers", static_cast<double>(count_headers(sent, "id")));
}

TEST_F(RowValuesTest, A200MBHeadersValueIsPoisonWithoutBeingParsed) {
  const std::string name = "sec_bighdr";
  auto relay = start(name, setup(name));
  const auto before = peak_rss(*relay);

  // {"h": [0,0,…]}: the shape that costs simdjson the most (≈13 bytes per byte).
  insert(name, "big-1", "('{\"h\": [' || repeat('0,', " + std::to_string(kValueBytes / 2 - 8) + ") || '0]}')::json");
  insert(name, "after-1", R"('{"traceparent": "00-x"}'::json)");

  const auto dead = read_topic(mock.bootstrap(), "dlq-" + name, 1, 180s);
  ASSERT_EQ(dead.size(), 1U) << log_tail(name + ".log");
  EXPECT_EQ(dead[0].header("id"), "big-1");
  EXPECT_EQ(dead[0].header("pgoutbox.dlq.error.code"), "TOO_MANY_HEADERS");
  const auto records = read_topic(mock.bootstrap(), name + ".E", 1, 60s);
  ASSERT_EQ(records.size(), 1U) << log_tail(name + ".log");
  EXPECT_EQ(records[0].header("id"), "after-1") << "the stream goes on";

  const auto peak = peak_rss(*relay);
  if (!kSanitized) {
    EXPECT_LT(peak, 2 * kValueBytes + kAllowedBeyondCopies)
        << "peak RSS " << (peak >> 20) << " MiB: the value was parsed or copied again";
  }
  EXPECT_TRUE(relay->running());
  Figures("headers_200mb")
      .add_mib("rss_peak_before", before)
      .add_mib("rss_peak", peak)
      .add_mib("rss_after", rss(*relay))
      .add_mib("value", kValueBytes);
}

TEST_F(RowValuesTest, A200MBEnvelopeIsPoisonWithoutBeingParsed) {
  const std::string name = "sec_bigmsg";
  auto relay = start(
      name, setup(name, "messages:\n  - prefix: " + name + ".outbox\n    topic: \"" + name + ".${aggregatetype}\"\n"));
  const auto before = peak_rss(*relay);

  pg.exec("SELECT pg_logical_emit_message(true, '" + name +
          ".outbox', '{\"id\": \"big-1\", \"aggregatetype\": \"E\", \"aggregateid\": \"k\", \"payload\": [' || "
          "repeat('0,', " +
          std::to_string(kValueBytes / 2 - 64) + ") || '0]}')");
  pg.exec("SELECT pg_logical_emit_message(true, '" + name +
          ".outbox', '{\"id\": \"after-1\", \"aggregatetype\": \"E\", \"aggregateid\": \"k\", \"payload\": {}}')");

  const auto dead = read_topic(mock.bootstrap(), "dlq-" + name, 1, 180s);
  ASSERT_EQ(dead.size(), 1U) << log_tail(name + ".log");
  EXPECT_EQ(dead[0].header("pgoutbox.dlq.error.code"), "ENVELOPE_TOO_LARGE");
  EXPECT_EQ(dead[0].header("pgoutbox.dlq.table"), "message:" + name + ".outbox");
  EXPECT_EQ(dead[0].value.value_or("").size(), 0U) << "the dead-letter copy does not carry the envelope";
  const auto records = read_topic(mock.bootstrap(), name + ".E", 1, 60s);
  ASSERT_EQ(records.size(), 1U) << log_tail(name + ".log");
  EXPECT_EQ(records[0].header("id"), "after-1") << "the stream goes on";

  const auto peak = peak_rss(*relay);
  if (!kSanitized) {
    EXPECT_LT(peak, 2 * kValueBytes + kAllowedBeyondCopies)
        << "peak RSS " << (peak >> 20) << " MiB: the envelope was parsed or copied again";
  }
  EXPECT_TRUE(relay->running());
  Figures("envelope_200mb")
      .add_mib("rss_peak_before", before)
      .add_mib("rss_peak", peak)
      .add_mib("rss_after", rss(*relay))
      .add_mib("envelope", kValueBytes);
}

}  // namespace
}  // namespace pgoutbox::test
