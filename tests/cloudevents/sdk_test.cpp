// docs/migrating.md "Record formats": pgoutbox's CloudEvents records, read back by a client
// nobody here wrote. pgoutbox relays four outbox tables — jsonb in binary mode (the timestamp
// and headers columns mapped, a traceparent among the headers), text and bytea in structured
// mode, bytea in binary mode — and two message outboxes (binary and structured) into real Kafka; the test consumes
// every record and hands them to read_events.py, which parses each with the CloudEvents Python SDK's Kafka bindings
// (the current one and the 1.x API) and checks the attributes and the data. A text payload that is not JSON (a row's, a
// message's) cannot be structured-mode data: it must be dead-lettered, named, never written.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "child_process.h"
#include "kafka_client.h"
#include "pgoutbox/outbox/debezium_json.h"
#include "pgoutbox_process.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;
using outbox::debezium::base64;
using outbox::debezium::json_string;

std::string b64_or_null(const std::optional<std::string>& bytes) {
  return bytes ? json_string(base64(*bytes)) : std::string("null");
}

// One record for read_events.py: what was consumed, and what the SDK must read from it.
std::string record_json(const ConsumedRecord& r, const std::string& mode, const std::string& expected) {
  std::string headers;
  for (const auto& [name, value] : r.headers) {
    headers += (headers.empty() ? "" : ", ") + ("[" + json_string(name) + ", " + json_string(base64(value)) + "]");
  }
  return "{\"mode\": " + json_string(mode) + ", \"key\": " + b64_or_null(r.key) +
         ", \"value\": " + b64_or_null(r.value) + ", \"headers\": [" + headers + "], \"expected\": " + expected + "}";
}

TEST(CloudEventsSdk, EveryRecordIsAValidEventWithTheExpectedAttributes) {
  auto& pg = shared_postgres();
  auto& kafka = shared_kafka();
  pg.exec(
      "CREATE TABLE ce_bin (id text PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text, type text, payload "
      "jsonb, created_at timestamptz, headers jsonb);"
      "CREATE TABLE ce_struct (id text PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text, type text, payload "
      "text);"
      "CREATE TABLE ce_bytes (id text PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text, type text, payload "
      "bytea);"
      "CREATE TABLE ce_bytes_bin (LIKE ce_bytes INCLUDING ALL);"
      "CREATE PUBLICATION ce_pub FOR TABLE ce_bin, ce_struct, ce_bytes, ce_bytes_bin");
  pg.exec("SELECT pg_create_logical_replication_slot('ce_slot', 'pgoutput')");
  for (const char* topic :
       {"ce.bin", "ce.struct", "ce.bytes", "ce.bytesbin", "ce.msgbin", "ce.msgstruct", "ce.dead-letter"}) {
    create_topic(kafka.bootstrap(), topic, 1);
  }
  ScratchDir scratch("cloudevents-sdk", std::nullopt);
  const std::string config = scratch.path() + "/pgoutbox.yaml";
  std::ofstream(config) << "postgres:\n  dsn: \"" << pg.dsn()
                        << "\"\n  slot: ce_slot\n  publication: ce_pub\n  create_slot: false\n"
                           "kafka:\n  brokers: \""
                        << kafka.bootstrap()
                        << "\"\n"
                           "checkpoint:\n  topic: pgoutbox.checkpoints.cloudevents\n"
                           "poison:\n  policy: dead-letter\n  dead_letter_topic: ce.dead-letter\n"
                           "log_format: text\n"
                           "tables:\n"
                           "  - table: ce_bin\n    topic: ce.bin\n"
                           "    columns: {timestamp: created_at, headers: headers}\n"
                           "    format:\n      type: cloudevents-binary\n"
                           "      event_type: \"com.example.${aggregatetype}.${type}\"\n      subject_from_key: true\n"
                           "  - table: ce_struct\n    topic: ce.struct\n"
                           "    format: {type: cloudevents-structured, source: /custom/source}\n"
                           "  - table: ce_bytes\n    topic: ce.bytes\n    format: {type: cloudevents-structured}\n"
                           "  - table: ce_bytes_bin\n    topic: ce.bytesbin\n    format: {type: cloudevents-binary}\n"
                           "messages:\n"
                           "  - prefix: ce_msg_bin\n    topic: ce.msgbin\n"
                           "    format: {type: cloudevents-binary, subject_from_key: true}\n"
                           "  - prefix: ce_msg_struct\n    topic: ce.msgstruct\n"
                           "    format: {type: cloudevents-structured, event_type: \"com.example.${aggregatetype}\"}\n";
  pg.exec(
      "INSERT INTO ce_bin VALUES ('b1', 'order', 'k1', 'Created', '{\"n\": 1, \"s\": \"é😀\"}', "
      "'2026-12-07 10:00:00.5+00', '{\"traceparent\": \"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\"}');"
      "INSERT INTO ce_bin VALUES ('b2', 'order', NULL, 'Paid', '[1, \"two\"]', NULL, NULL);"
      "INSERT INTO ce_struct VALUES ('s1', 'invoice', 'k2', 'Issued', '{\"a\": {\"b\": null}, \"u\": \"✓\"}');"
      "INSERT INTO ce_struct VALUES ('s2', 'invoice', 'k2', 'Voided', 'not json');"
      "INSERT INTO ce_struct VALUES ('s3', 'invoice', 'k3', 'Issued', '42');"
      "INSERT INTO ce_bytes VALUES ('y1', 'blob', 'k4', 'Stored', '\\x00ff10');"
      "INSERT INTO ce_bytes_bin VALUES ('z1', 'blob', 'k5', 'Stored', '\\xdeadbeef');"
      "SELECT pg_logical_emit_message(true, 'ce_msg_bin', '{\"id\": \"m1\", \"aggregatetype\": \"cart\", "
      "\"aggregateid\": \"c9\", \"type\": \"Emptied\", \"payload\": {\"items\": []}, \"headers\": "
      "{\"traceparent\": \"00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01\"}}');"
      "SELECT pg_logical_emit_message(true, 'ce_msg_bin', '{\"id\": 2, \"aggregatetype\": \"cart\", "
      "\"type\": \"Noted\", \"payload\": \"plain text\"}');"
      "SELECT pg_logical_emit_message(true, 'ce_msg_struct', '{\"id\": \"m3\", \"aggregatetype\": \"cart\", "
      "\"aggregateid\": \"c9\", \"payload\": {\"total\": 1.5}}');"
      "SELECT pg_logical_emit_message(true, 'ce_msg_struct', '{\"id\": \"m4\", \"aggregatetype\": \"cart\", "
      "\"payload\": \"not json\"}')");
  PgoutboxProcess relay(PGOUTBOX_BINARY, config, scratch.path() + "/pgoutbox.log");

  const auto bin = read_topic(kafka.bootstrap(), "ce.bin", 2, 60s);
  const auto structured = read_topic(kafka.bootstrap(), "ce.struct", 2, 60s);
  const auto bytes = read_topic(kafka.bootstrap(), "ce.bytes", 1, 60s);
  const auto bytes_bin = read_topic(kafka.bootstrap(), "ce.bytesbin", 1, 60s);
  const auto msg_bin = read_topic(kafka.bootstrap(), "ce.msgbin", 2, 60s);
  const auto msg_struct = read_topic(kafka.bootstrap(), "ce.msgstruct", 1, 60s);
  const auto dead = read_topic(kafka.bootstrap(), "ce.dead-letter", 2, 60s);
  relay.signal(SIGTERM);
  EXPECT_EQ(relay.wait_exit(30s), 0) << tail_of(scratch.path() + "/pgoutbox.log");
  ASSERT_EQ(bin.size(), 2U) << tail_of(scratch.path() + "/pgoutbox.log");
  ASSERT_EQ(structured.size(), 2U) << tail_of(scratch.path() + "/pgoutbox.log");
  ASSERT_EQ(bytes.size(), 1U);
  ASSERT_EQ(bytes_bin.size(), 1U);
  ASSERT_EQ(msg_bin.size(), 2U);
  ASSERT_EQ(msg_struct.size(), 1U);

  // The non-JSON text (a row's and a message's) was dead-lettered with the reason, and nothing
  // invalid was written.
  ASSERT_EQ(dead.size(), 2U);
  for (const auto& d : dead) {
    EXPECT_TRUE(d.header("id") == "s2" || d.header("id") == "m4") << d.header("id").value_or("(none)");
    EXPECT_NE(d.header("pgoutbox.dlq.error").value_or("").find("cloudevents-structured carries the payload as JSON"),
              std::string::npos);
  }

  const std::string source_of = "/postgres/public.";  // the default: /<database>/<schema>.<table>
  std::vector<std::string> records = {
      record_json(bin[0], "binary",
                  R"({"attributes": {"specversion": "1.0", "id": "b1", "source": ")" + source_of +
                      R"(ce_bin", "type": "com.example.order.Created", "time": "2026-12-07T10:00:00.500Z", )"
                      R"("subject": "k1", "partitionkey": "k1", "datacontenttype": "application/json", )"
                      R"("traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, )"
                      R"("data": {"n": 1, "s": "é😀"}})"),
      record_json(bin[1], "binary",
                  R"({"attributes": {"id": "b2", "type": "com.example.order.Paid"}, "present": ["time"], )"
                  R"("absent": ["subject", "partitionkey", "traceparent"], "data": [1, "two"]})"),
      record_json(structured[0], "structured",
                  R"({"attributes": {"specversion": "1.0", "id": "s1", "source": "/custom/source", "type": "Issued", )"
                  R"("partitionkey": "k2", "datacontenttype": "application/json"}, "present": ["time"], )"
                  R"("absent": ["subject"], "data": {"a": {"b": null}, "u": "✓"}})"),
      record_json(structured[1], "structured", R"({"attributes": {"id": "s3", "type": "Issued"}, "data": 42})"),
      record_json(bytes[0], "structured",
                  R"({"attributes": {"id": "y1", "source": ")" + source_of +
                      R"(ce_bytes", "datacontenttype": "application/octet-stream"}, "data_base64": "AP8Q"})"),
      record_json(bytes_bin[0], "binary",
                  R"({"attributes": {"id": "z1", "datacontenttype": "application/octet-stream"}, "bytes": true, )"
                  R"("data_base64": "3q2+7w=="})"),
      record_json(msg_bin[0], "binary",
                  R"({"attributes": {"specversion": "1.0", "id": "m1", "source": "/postgres/messages/ce_msg_bin", )"
                  R"("type": "Emptied", "subject": "c9", "partitionkey": "c9", "datacontenttype": "application/json", )"
                  R"("traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"}, "present": ["time"], )"
                  R"("data": {"items": []}})"),
      record_json(msg_bin[1], "binary",
                  R"({"attributes": {"id": "2", "type": "Noted", "datacontenttype": "text/plain; charset=utf-8"}, )"
                  R"("absent": ["subject", "partitionkey"], "text": "plain text"})"),
      record_json(msg_struct[0], "structured",
                  R"({"attributes": {"id": "m3", "source": "/postgres/messages/ce_msg_struct", )"
                  R"("type": "com.example.cart", "partitionkey": "c9", "datacontenttype": "application/json"}, )"
                  R"("data": {"total": 1.5}})"),
  };
  std::string all = "[";
  for (const auto& r : records) all += (all.size() > 1 ? ",\n" : "\n") + r;
  std::ofstream(scratch.path() + "/records.json") << all << "\n]\n";

  const std::string out = scratch.path() + "/sdk.out";
  const std::string command = std::string(PGOUTBOX_PYTHON) + " " + PGOUTBOX_READ_EVENTS + " " + scratch.path() +
                              "/records.json > " + out + " 2>&1";
  const int status = std::system(command.c_str());
  EXPECT_EQ(status, 0) << tail_of(out);
  std::printf("%s", tail_of(out).c_str());
  pg.drop_slot_when_free("ce_slot");
}

}  // namespace
}  // namespace pgoutbox::test
