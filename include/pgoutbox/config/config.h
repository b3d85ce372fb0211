#pragma once

// The one typed configuration of pgoutbox. Loaded from one YAML file (config/loader.h); every
// key has a description, a default and whether it is required (config/schema.h lists them),
// and every key can be overridden from the environment.
//
// This module depends on nothing else of pgoutbox.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pgoutbox::config {

struct PostgresConfig {
  std::string dsn;       // libpq conninfo or URI, without the password when password_* is used
  std::string password;  // secret: from PGOUTBOX_POSTGRES_PASSWORD or password_file, never logged
  std::string slot = "pgoutbox";
  std::string publication = "pgoutbox";
  bool create_slot = true;          // create the slot when missing
  bool failover_slot = false;       // create it with failover (PostgreSQL 17+): synchronised to standbys
  bool create_publication = false;  // create the publication when missing (needs table ownership)
  // When dsn names a hot standby: its primary, asked for a running-transactions record while the
  // slot is created on the standby (pg_log_standby_snapshot()); empty: wait for the primary's own.
  std::string primary_dsn;
  std::chrono::milliseconds status_interval{10'000};
  std::string application_name = "pgoutbox";
};

struct KafkaConfig {
  std::string brokers;                            // bootstrap.servers
  std::map<std::string, std::string> properties;  // any librdkafka property, applied last
  // Exactly-once only: the producer's transactional.id; empty: derived from the slot's identity
  // (pgoutbox-<system identifier>-<database>-<slot>), the same for every instance of one slot.
  std::string transactional_id;
  // Exactly-once only: how long one Kafka transaction collects whole Postgres transactions
  // before it is committed (it is committed sooner when the in-flight caps are reached).
  std::chrono::milliseconds transaction_interval{100};
  // Exactly-once only: two transactional producers (transactional_id and transactional_id
  // "-alt") take turns, one Kafka transaction each. The coordinator answers a commit before it
  // has written the commit's markers, and refuses the same id's next transaction until it has
  // (CONCURRENT_TRANSACTIONS, retried by librdkafka after 20 ms); the other id has no such wait.
  bool alternate_producers = true;
  // At-least-once: when the stream is caught up, send what is queued at once instead of waiting
  // out linger.ms, so batching follows the load: whole batches while a backlog drains, one
  // round trip per event at low rates.
  bool send_when_caught_up = true;
};

// What a consumer of the topics sees after a crash or a restart (docs/spec.md I10).
enum class Delivery {
  at_least_once,  // idempotent producer; after a crash only the suffix past the checkpoint comes again
  exactly_once,   // Kafka transactions; a read_committed consumer sees each event once
};

// The durable checkpoint in Kafka: the end LSN of the newest fully acknowledged transaction,
// in a compacted topic keyed by the slot's identity. On start, transactions it covers are
// skipped, so a Postgres crash (which rewinds the slot to its last checkpointed position) does
// not publish them again.
struct CheckpointConfig {
  bool enabled = true;
  std::string topic = "pgoutbox.checkpoints";
  std::chrono::milliseconds interval{1000};  // at most one write per interval (at-least-once)
  // HMAC-SHA256 key that signs each checkpoint (docs/spec.md I11); a secret, from
  // PGOUTBOX_CHECKPOINT_SIGNING_KEY or checkpoint.signing_key_file. Empty: checkpoints are written
  // unsigned and never trusted to skip anything (a forged one could otherwise make pgoutbox skip
  // events); exactly-once requires a key.
  std::string signing_key;
  static constexpr std::size_t kMinSigningKeyBytes = 32;
  // Set by `run --accept-lost-checkpoint`, never by the file: exactly-once starts once though the
  // checkpoint topic is new and the slot older (docs/operating.md, exit 25).
  bool accept_lost = false;
};

// Which column plays which role (docs/spec.md "Attaching to existing outbox tables").
struct ColumnRoles {
  std::string id = "id";
  std::string aggregate_type = "aggregatetype";  // routing value
  std::string aggregate_id = "aggregateid";      // record key
  std::string payload = "payload";
  std::optional<std::string> type = "type";  // header "type"; a missing default column is skipped
  std::optional<std::string> headers;        // json/jsonb object column, each key a header
  std::optional<std::string> timestamp;      // record timestamp, else the commit time
};

// json_null: the format's own null value (debezium-json's {"schema":…,"payload":null}, as
// Debezium's router writes a NULL payload unless route.tombstone.on.empty.payload).
enum class NullPayload { poison, tombstone, json_null };

// The bytes of each record's key and value (docs/migrating.md "Record formats"). string: the key column's text and
// the payload as stored. debezium_json: what Debezium's outbox event router writes through Kafka
// Connect's JsonConverter, with its schemas.enable and the router's table.expand.json.payload.
// cloudevents_binary and cloudevents_structured: a CloudEvent in the Kafka protocol binding's
// binary content mode (ce_ headers, the payload as the value) or structured content mode (an
// application/cloudevents+json value).
enum class Format { string, debezium_json, cloudevents_binary, cloudevents_structured };
struct FormatConfig {
  Format type = Format::string;
  bool schemas = true;               // JsonConverter's schemas.enable (its default: true)
  bool expand_json_payload = false;  // the router's table.expand.json.payload
  // CloudEvents: the source attribute (empty: /<database>/<schema>.<table>, or
  // /<database>/messages/<prefix> for a message outbox, set at load), the type attribute as a
  // template of ${column} (or ${field}) references (empty: the type column's or field's value), and
  // whether the subject is the record key.
  std::string source;
  std::string event_type;
  bool subject_from_key = false;
  bool cloudevents() const { return type == Format::cloudevents_binary || type == Format::cloudevents_structured; }
};

// Rows already in the table published when pgoutbox creates the slot, from the slot's own
// snapshot (docs/migrating.md "Switching from a polling relay"). An empty `where` turns it off.
struct BackfillConfig {
  std::string where;     // an SQL predicate over the table's columns, e.g. status = 'NEW'
  std::string order_by;  // the column rows are read in; empty: columns.id
  std::uint64_t chunk_rows = 10'000;
  // Each statement that reads the table with the predicate (backfill and republish) is cancelled
  // by PostgreSQL after this long (SECURITY.md "Backfill and republish predicates").
  std::chrono::milliseconds statement_timeout{300'000};
  bool enabled() const { return !where.empty(); }
};

// The marker slots that record a backfill's state, <slot>_backfilling and <slot>_backfilled:
// with them the slot's name has this many bytes fewer than Postgres's 63.
inline constexpr std::string_view kBackfillingSuffix = "_backfilling";
inline constexpr std::string_view kBackfilledSuffix = "_backfilled";

struct TableConfig {
  std::string schema = "public";
  std::string name;
  ColumnRoles columns;
  bool type_column_explicit = false;                    // set when the file names columns.type: then it must exist
  std::string topic = "outbox.event.${aggregatetype}";  // ${column} is replaced by that column's text
  NullPayload null_payload = NullPayload::poison;
  bool validate_json = false;  // a text/bytea payload that is not JSON is poison
  FormatConfig format;
  // An ECMAScript regular expression every expanded topic of the table must match whole; a
  // topic that does not is poison INVALID_TOPIC. Empty: any topic name Kafka accepts.
  std::string topic_pattern;
  BackfillConfig backfill;
};

// A table-less outbox: logical decoding messages an application writes with
// pg_logical_emit_message(true, prefix, envelope). The envelope is a JSON object; which of its
// fields plays which role follows ColumnRoles (Debezium's outbox column names by default).
struct EnvelopeFields {
  std::string id = "id";
  std::string aggregate_type = "aggregatetype";    // routing value
  std::string aggregate_id = "aggregateid";        // record key
  std::string payload = "payload";                 // an object (sent as JSON) or a string (sent as it is)
  std::optional<std::string> type = "type";        // header "type" when the envelope has it
  std::optional<std::string> headers = "headers";  // an object; each key becomes a header
};

struct MessageConfig {
  std::string prefix;                                   // the message prefix, matched exactly
  std::string topic = "outbox.event.${aggregatetype}";  // ${field} is replaced by that envelope field
  EnvelopeFields fields;
  std::string topic_pattern;  // as TableConfig::topic_pattern
  FormatConfig format;        // as a table's; the source's default names the prefix
};

struct LimitsConfig {
  std::uint64_t max_in_flight_records = 20'000;
  std::uint64_t max_in_flight_bytes = 16ULL << 20;
  double resume_ratio = 0.5;  // resume reading below this share of both caps
};

struct RetryConfig {
  std::chrono::milliseconds min{500};
  std::chrono::milliseconds max{30'000};
  double factor = 2.0;
};

// What happens to a record Kafka rejects for good, or that fails validation (docs/spec.md I8).
enum class PoisonPolicy { stop, dead_letter, skip };

struct PoisonConfig {
  PoisonPolicy policy = PoisonPolicy::stop;
  std::string dead_letter_topic = "pgoutbox.dead-letter";
  std::uint32_t max_retries = 3;                  // retries of a permanent Kafka error before the policy
  std::chrono::milliseconds retry_backoff{1000};  // first retry delay; doubles, up to reconnect.max
};

struct Config {
  std::string source;  // the file it came from, for messages
  PostgresConfig postgres;
  KafkaConfig kafka;
  std::vector<TableConfig> tables;
  std::vector<MessageConfig> messages;
  bool provenance_headers = false;  // pgoutbox.lsn, pgoutbox.commit_time, pgoutbox.xid
  LimitsConfig limits;
  RetryConfig reconnect;
  PoisonConfig poison;
  Delivery delivery = Delivery::at_least_once;
  CheckpointConfig checkpoint;
  std::chrono::milliseconds shutdown_timeout{30'000};
  std::string metrics_address;  // host:port for /metrics, /healthz, /readyz; empty: off
  // Where metrics_address was set, for messages: "FILE:LINE:COLUMN: metrics_address" or
  // "environment variable PGOUTBOX_METRICS_ADDRESS"; empty when it was not set.
  std::string metrics_address_origin;
  // Host names the metrics server answers besides IP addresses and localhost (lower case, no final
  // dot); any other Host header is refused against DNS rebinding.
  std::vector<std::string> metrics_allowed_hosts;
  std::uint64_t metrics_topic_labels = 100;  // topics with series of their own; the rest are "other"
  std::string log_format = "auto";           // auto (json unless a terminal), json, text
  std::string log_level = "info";
  // What the loader accepted but an operator should see (a secret file readable by others):
  // `check` shows each as a warning, `run` logs each once at start.
  std::vector<std::string> warnings;
};

}  // namespace pgoutbox::config
