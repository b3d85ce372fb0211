// The table of every configuration key: its documentation, its parser and its printer
// (fields.h). Adding a key here adds it to the loader, the environment, describe() and the
// reference at once.

#include <fmt/format.h>

#include <regex>
#include <stdexcept>
#include <type_traits>

#include "dsn.h"
#include "fields.h"
#include "pgoutbox/config/predicate.h"
#include "pgoutbox/config/redact.h"
#include "pgoutbox/config/topic_template.h"
#include "pgoutbox/config/transactional_id.h"
#include "table_name.h"
#include "values.h"

namespace pgoutbox::config::detail {
namespace {

// The in-flight caps bound memory (SPEC I6); a cap so large it is never reached disables
// backpressure, so each has a ceiling. The producer's queue is sized at twice each cap, which
// these keep within librdkafka's ranges.
constexpr std::uint64_t kMaxInFlightRecords = 1'000'000;
constexpr std::uint64_t kMaxInFlightBytes = 1ULL << 30;
// Series per family labelled by topic; past this, topic="other".
constexpr std::uint64_t kMaxTopicLabels = 10'000;

template <class Root>
// In this template clang-tidy 14 does not resolve the std::move calls below and sees only const uses.
// NOLINTNEXTLINE(performance-unnecessary-value-param): false positive, the strings are moved in
Entry<Root> base(std::string path, std::string type, std::string description) {
  Entry<Root> e;
  e.path = std::move(path);
  e.type = std::move(type);
  e.description = std::move(description);
  return e;
}

// Access is a generic lambda returning a reference to the field, so it serves set (on Root&)
// and show (on const Root&) alike.
template <class Root, class Access, class Check>
Entry<Root> text(std::string path, std::string type, std::string description, Access access, Check check) {
  auto e = base<Root>(std::move(path), std::move(type), std::move(description));
  e.set = [access, check](Root& r, const Scalar& s) {
    check(s.text);
    access(r) = s.text;
  };
  e.show = [access](const Root& r) { return std::string(access(r)); };
  return e;
}

template <class Root, class Access>
Entry<Root> flag(std::string path, std::string description, Access access) {
  auto e = base<Root>(std::move(path), "bool", std::move(description));
  e.set = [access](Root& r, const Scalar& s) { access(r) = parse_bool(s.text); };
  e.show = [access](const Root& r) { return std::string(access(r) ? "true" : "false"); };
  return e;
}

template <class Root, class Access>
Entry<Root> duration(std::string path, std::string description, Access access) {
  auto e = base<Root>(std::move(path), "duration", std::move(description));
  e.set = [access](Root& r, const Scalar& s) { access(r) = parse_duration(s.text); };
  e.show = [access](const Root& r) { return format_duration(access(r)); };
  return e;
}

template <class Root, class Access, class Check>
Entry<Root> number(std::string path, std::string description, Access access, Check check) {
  auto e = base<Root>(std::move(path), "number", std::move(description));
  e.set = [access, check](Root& r, const Scalar& s) {
    const double value = parse_number(s.text);
    check(value, s.text);
    access(r) = value;
  };
  e.show = [access](const Root& r) { return format_number(access(r)); };
  return e;
}

// A whole number up to `max`, and above 0 unless `zero_allowed`; `why`, when not empty, says
// why a larger one is refused.
template <class Root, class Access>
Entry<Root> count(std::string path, std::string description, Access access, bool zero_allowed, std::uint64_t max,
                  std::string_view why = {}) {
  auto e = base<Root>(std::move(path), "integer", std::move(description));
  e.set = [access, zero_allowed, max, why](Root& r, const Scalar& s) {
    const auto value = parse_count(s.text);
    if (value == 0 && !zero_allowed) throw Invalid(fmt::format("must be greater than 0 (got {})", quote(s.text)));
    if (value > max) {
      throw Invalid(fmt::format("must be at most {}{}{} (got {})", max, why.empty() ? "" : ": ", why, quote(s.text)));
    }
    access(r) = static_cast<std::remove_reference_t<decltype(access(r))>>(value);
  };
  e.show = [access](const Root& r) { return fmt::format("{}", access(r)); };
  return e;
}

template <class Root, class Access>
Entry<Root> choice(std::string path, std::string description, Access access, const std::vector<std::string>& allowed) {
  std::string type = "one of";
  for (const auto& word : allowed) type += (type == "one of" ? " " : ", ") + word;
  auto e = base<Root>(std::move(path), std::move(type), std::move(description));
  e.set = [access, allowed](Root& r, const Scalar& s) {
    check_choice(s.text, allowed);
    access(r) = s.text;
  };
  e.show = [access](const Root& r) { return std::string(access(r)); };
  return e;
}

void check_name(std::string_view text) {
  if (text.empty()) throw Invalid("must not be empty");
  if (text.size() > kMaxNameBytes)
    throw Invalid(
        fmt::format("is longer than {} bytes, which Postgres truncates (got {})", kMaxNameBytes, quote(text)));
}

// The scanner's messages carry positions only: a DSN may hold a password.
void check_dsn(std::string_view text) {
  if (text.empty()) throw Invalid("must not be empty");
  if (const auto scan = scan_dsn(text); scan.error) throw Invalid(fmt::format("is malformed: {}", *scan.error));
}

// Slot names are restricted further than other names (ReplicationSlotValidateName).
void check_slot_name(std::string_view text) {
  check_name(text);
  for (char c : text) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      throw Invalid(fmt::format("may contain only lower case letters, digits and '_' (got {})", quote(text)));
    }
  }
}

// Postgres replaces anything but printable ASCII in application_name with '?'.
void check_application_name(std::string_view text) {
  check_name(text);
  for (char c : text) {
    if (c < 0x20 || c > 0x7e) throw Invalid(fmt::format("may contain only printable ASCII (got {})", quote(text)));
  }
}

void check_brokers(std::string_view text) {
  if (text.empty()) throw Invalid("must list at least one broker, e.g. 127.0.0.1:9092");
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item =
        text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (item.find_first_not_of(' ') == std::string_view::npos) {
      throw Invalid(fmt::format("has an empty entry; write host:port[,host:port...] (got {})", quote(text)));
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
}

// metrics_allowed_hosts: comma-separated host names as a Host header carries them, without the
// port (every port is the server's) and compared without case or final dot (RFC 1034 3.1).
// Letters, digits, '-', '.' and '_' (Docker's service names); IP addresses need no listing.
std::vector<std::string> parse_host_names(std::string_view text) {
  std::vector<std::string> names;
  if (text.find_first_not_of(' ') == std::string_view::npos) return names;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    std::string_view item =
        text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    const auto first = item.find_first_not_of(' ');
    item = first == std::string_view::npos ? std::string_view{}
                                           : item.substr(first, item.find_last_not_of(' ') - first + 1);
    if (item.empty()) throw Invalid(fmt::format("has an empty entry; write name[,name...] (got {})", quote(text)));
    if (item.find(':') != std::string_view::npos) {
      throw Invalid(
          fmt::format("lists host names without a port (every port is answered) and no IPv6 address (every "
                      "address is answered) (got {})",
                      quote(item)));
    }
    std::string name;
    for (const char c : item) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                      c == '.' || c == '_';
      if (!ok) {
        throw Invalid(fmt::format("may list only host names: letters, digits, '-', '.' and '_', no wildcard (got {})",
                                  quote(item)));
      }
      name += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    if (name.back() == '.') name.pop_back();
    if (name.empty() || name.size() > 253)
      throw Invalid(fmt::format("has a name of 0 or over 253 characters (got {})", quote(item)));
    names.push_back(std::move(name));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return names;
}

// Kafka's rules for topic names: 1 to 249 of [a-zA-Z0-9._-].
void check_topic_name(std::string_view text) {
  if (text.empty() || text.size() > 249)
    throw Invalid(fmt::format("must have 1 to 249 characters (got {})", quote(text)));
  for (char c : text) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-')) {
      throw Invalid(fmt::format("may contain only letters, digits, '.', '_' and '-' (got {})", quote(text)));
    }
  }
}

void check_column(std::string_view text) {
  if (text.empty()) throw Invalid("must name a column");
  if (text.size() > kMaxNameBytes)
    throw Invalid(
        fmt::format("is longer than {} bytes, which Postgres truncates (got {})", kMaxNameBytes, quote(text)));
}

template <class Access>
Entry<TableConfig> column(std::string path, std::string description, Access access) {
  return text<TableConfig>(std::move(path), "column", std::move(description), access, check_column);
}

template <class Access>
Entry<TableConfig> optional_column(std::string path, std::string description, Access access) {
  auto e = base<TableConfig>(std::move(path), "column or null", std::move(description));
  e.nullable = true;
  e.set = [access](TableConfig& t, const Scalar& s) {
    if (s.null) {
      access(t).reset();
      return;
    }
    check_column(s.text);
    access(t) = s.text;
  };
  e.show = [access](const TableConfig& t) { return access(t) ? *access(t) : std::string("null"); };
  return e;
}

std::vector<Entry<Draft>> make_global_entries() {
  std::vector<Entry<Draft>> v;

  auto dsn = text<Draft>(
      "postgres.dsn", "string",
      "libpq connection string, key=value or postgresql:// URI. replication=database is added by pgoutbox. A password "
      "(or sslpassword) in it is refused in the file: give it in PGOUTBOX_POSTGRES_PASSWORD or postgres.password_file "
      "(or the whole DSN in PGOUTBOX_POSTGRES_DSN); it is redacted everywhere.",
      [](auto& d) -> auto& { return d.config.postgres.dsn; }, check_dsn);
  dsn.required = true;
  dsn.show = [](const Draft& d) { return redact_dsn(d.config.postgres.dsn); };
  v.push_back(std::move(dsn));

  auto password =
      base<Draft>("postgres.password", "string (secret)",
                  "Password of the Postgres role, kept out of the file; it wins over postgres.password_file.");
  password.secret = true;
  password.in_file = false;
  password.set = [](Draft& d, const Scalar& s) {
    if (s.text.empty()) throw Invalid("is empty; unset the variable instead");
    d.config.postgres.password = s.text;
  };
  password.show = [](const Draft& d) {
    return d.config.postgres.password.empty() ? std::string() : std::string(kRedacted);
  };
  v.push_back(std::move(password));

  auto password_file = base<Draft>(
      "postgres.password_file", "path",
      "File holding the Postgres password (a mounted secret); trailing newlines are dropped. Relative to the "
      "configuration file's folder.");
  password_file.nullable = true;
  password_file.described = false;
  password_file.set = [](Draft& d, const Scalar& s) {
    if (s.null) {
      d.password_file.reset();
      return;
    }
    if (s.text.empty()) throw Invalid("must not be empty");
    d.password_file = s.text;
  };
  password_file.show = [](const Draft& d) { return d.password_file.value_or(""); };
  v.push_back(std::move(password_file));

  v.push_back(text<Draft>(
      "postgres.slot", "slot name", "Logical replication slot to stream from (lower case letters, digits, '_').",
      [](auto& d) -> auto& { return d.config.postgres.slot; }, check_slot_name));
  v.push_back(text<Draft>(
      "postgres.publication", "name", "Publication listing the outbox tables (pgoutput's publication_names).",
      [](auto& d) -> auto& { return d.config.postgres.publication; }, check_name));
  v.push_back(flag<Draft>(
      "postgres.create_slot", "Create the slot (pgoutput) when it does not exist.",
      [](auto& d) -> auto& { return d.config.postgres.create_slot; }));
  v.push_back(flag<Draft>(
      "postgres.failover_slot",
      "Create the slot with failover = true so that a physical standby with "
      "sync_replication_slots = on keeps a copy and a promoted standby resumes from it "
      "(PostgreSQL 17 or later; refused before 17).",
      [](auto& d) -> auto& { return d.config.postgres.failover_slot; }));
  auto primary_dsn = text<Draft>(
      "postgres.primary_dsn", "string",
      "When postgres.dsn names a hot standby (PostgreSQL 16+): a libpq connection string of its primary, over which "
      "pgoutbox calls pg_log_standby_snapshot() while it creates its slot on the standby, so the creation takes "
      "milliseconds instead of waiting for the primary's next running-transactions record. Optional; the role needs "
      "EXECUTE on pg_log_standby_snapshot() (a superuser, or a grant). Uses postgres.password too; a password in it is "
      "refused in the file, as in postgres.dsn.",
      [](auto& d) -> auto& { return d.config.postgres.primary_dsn; },
      [](std::string_view text) {
        if (!text.empty()) check_dsn(text);
      });
  primary_dsn.show = [](const Draft& d) { return redact_dsn(d.config.postgres.primary_dsn); };
  v.push_back(std::move(primary_dsn));
  v.push_back(flag<Draft>(
      "postgres.create_publication",
      "Create the publication for the configured tables when it does not exist (needs ownership of "
      "the tables).",
      [](auto& d) -> auto& { return d.config.postgres.create_publication; }));
  v.push_back(duration<Draft>(
      "postgres.status_interval",
      "How often the confirmed position is reported to the server, also when idle; keep it well "
      "below the server's wal_sender_timeout.",
      [](auto& d) -> auto& { return d.config.postgres.status_interval; }));
  v.push_back(text<Draft>(
      "postgres.application_name", "string",
      "application_name of the replication connection, as pg_stat_replication shows it.",
      [](auto& d) -> auto& { return d.config.postgres.application_name; }, check_application_name));

  auto brokers = text<Draft>(
      "kafka.brokers", "string", "Kafka bootstrap servers, host:port[,host:port...] (librdkafka bootstrap.servers).",
      [](auto& d) -> auto& { return d.config.kafka.brokers; }, check_brokers);
  brokers.required = true;
  v.push_back(std::move(brokers));

  auto properties = base<Draft>(
      std::string(kPropertiesPath), "map of string",
      "librdkafka producer properties (TLS, SASL, batching...), applied after pgoutbox's own; values are strings. "
      "enable.idempotence=true, acks=all and message.timeout.ms=0 carry the delivery guarantees and cannot be changed; "
      "the brokers belong in kafka.brokers. Secret properties (names with password or secret, ssl.key.pem, "
      "sasl.oauthbearer.config) may be read from a file with a <name>_file key, e.g. sasl.password_file.");
  properties.shape = Shape::property_map;
  properties.show = [](const Draft& d) {
    std::string out;
    for (const auto& [name, value] : redact_properties(d.config.kafka.properties))
      out += fmt::format("{}{}: {}", out.empty() ? "" : ", ", name, value);
    return "{" + out + "}";
  };
  v.push_back(std::move(properties));

  auto tables = base<Draft>(std::string(kTablesPath), "list of tables",
                            "The outbox tables to relay; at least one unless messages lists an entry. All share the "
                            "slot and the publication.");
  tables.shape = Shape::table_list;
  tables.required = true;
  tables.show = [](const Draft& d) { return fmt::format("{} table(s)", d.config.tables.size()); };
  v.push_back(std::move(tables));

  auto messages = base<Draft>(
      std::string(kMessagesPath), "list of message outboxes",
      "Logical decoding messages to relay as outbox events (pg_logical_emit_message(true, prefix, envelope)); each "
      "entry matches one prefix exactly. Messages with other prefixes are ignored. Needs no table and no publication "
      "membership.");
  messages.shape = Shape::message_list;
  messages.show = [](const Draft& d) { return fmt::format("{} message outbox(es)", d.config.messages.size()); };
  v.push_back(std::move(messages));

  v.push_back(flag<Draft>(
      "provenance_headers", "Add headers pgoutbox.lsn, pgoutbox.commit_time and pgoutbox.xid to every record.",
      [](auto& d) -> auto& { return d.config.provenance_headers; }));

  v.push_back(count<Draft>(
      "limits.max_in_flight_records",
      "Records read but not yet acknowledged by Kafka; at this cap pgoutbox stops reading the stream (SPEC I6).",
      [](auto& d) -> auto& { return d.config.limits.max_in_flight_records; }, false, kMaxInFlightRecords,
      "a cap that is never reached is no backpressure"));

  auto bytes = base<Draft>("limits.max_in_flight_bytes", "size",
                           "Bytes of records read but not yet acknowledged; the other cap (SPEC I6). Plain bytes or "
                           "KiB, MiB, GiB.");
  bytes.set = [](Draft& d, const Scalar& s) {
    const auto value = parse_size(s.text);
    if (value == 0) throw Invalid(fmt::format("must be greater than 0 (got {})", quote(s.text)));
    if (value > kMaxInFlightBytes) {
      throw Invalid(fmt::format("must be at most {}: a cap that is never reached is no backpressure (got {})",
                                format_size(kMaxInFlightBytes), quote(s.text)));
    }
    d.config.limits.max_in_flight_bytes = value;
  };
  bytes.show = [](const Draft& d) { return format_size(d.config.limits.max_in_flight_bytes); };
  v.push_back(std::move(bytes));

  v.push_back(number<Draft>(
      "limits.resume_ratio",
      "Reading resumes once in-flight records and bytes are both below this share of their caps.",
      [](auto& d) -> auto& { return d.config.limits.resume_ratio; },
      [](double value, const std::string& text) {
        if (!(value > 0 && value < 1))
          throw Invalid(fmt::format("must be between 0 and 1, both excluded (got {})", text));
      }));

  v.push_back(duration<Draft>(
      "reconnect.min", "First delay of the backoff between reconnect attempts after a lost connection.",
      [](auto& d) -> auto& { return d.config.reconnect.min; }));
  v.push_back(duration<Draft>(
      "reconnect.max", "Longest delay between attempts; at least reconnect.min.",
      [](auto& d) -> auto& { return d.config.reconnect.max; }));
  v.push_back(number<Draft>(
      "reconnect.factor", "Each delay is the previous one times this factor, up to reconnect.max.",
      [](auto& d) -> auto& { return d.config.reconnect.factor; },
      [](double value, const std::string& text) {
        if (!(value >= 1)) throw Invalid(fmt::format("must be at least 1 (got {})", text));
      }));
  auto policy = base<Draft>("poison.policy", "one of stop, dead-letter, skip",
                            "A record Kafka rejects for good (too large, invalid, not authorised, unknown topic) "
                            "after poison.max_retries, or a row that cannot become a record: stop exits with code 4 "
                            "without confirming it; dead-letter publishes it to poison.dead_letter_topic and counts "
                            "it handled once that write is acknowledged; skip drops it (logged and counted).");
  policy.set = [](Draft& d, const Scalar& s) {
    check_choice(s.text, {"stop", "dead-letter", "skip"});
    d.config.poison.policy = s.text == "dead-letter" ? PoisonPolicy::dead_letter
                             : s.text == "skip"      ? PoisonPolicy::skip
                                                     : PoisonPolicy::stop;
  };
  policy.show = [](const Draft& d) {
    switch (d.config.poison.policy) {
      case PoisonPolicy::dead_letter:
        return std::string("dead-letter");
      case PoisonPolicy::skip:
        return std::string("skip");
      case PoisonPolicy::stop:
        break;
    }
    return std::string("stop");
  };
  v.push_back(std::move(policy));
  v.push_back(text<Draft>(
      "poison.dead_letter_topic", "topic",
      "Where dead-letter sends poison: the original key, value and headers, plus headers "
      "pgoutbox.dlq.error, .error.code, .topic, .attempts and .lsn.",
      [](auto& d) -> auto& { return d.config.poison.dead_letter_topic; }, check_topic_name));
  v.push_back(count<Draft>(
      "poison.max_retries",
      "How many times a record Kafka rejected for good is sent again (after poison.retry_backoff, doubling) before "
      "the policy applies. Rows that fail validation are not retried.",
      [](auto& d) -> auto& { return d.config.poison.max_retries; }, true, 100));
  v.push_back(duration<Draft>(
      "poison.retry_backoff",
      "Delay before the first retry of a rejected record; each further retry waits twice as "
      "long, up to reconnect.max.",
      [](auto& d) -> auto& { return d.config.poison.retry_backoff; }));

  auto delivery = base<Draft>(
      "delivery", "one of at-least-once, exactly-once",
      "at-least-once: an idempotent producer; after a crash, records past the last checkpoint are published "
      "again. exactly-once: Kafka transactions holding whole Postgres transactions and the checkpoint, so a "
      "read_committed consumer sees each event once, and an older instance is fenced (docs/spec.md I10).");
  delivery.set = [](Draft& d, const Scalar& s) {
    check_choice(s.text, {"at-least-once", "exactly-once"});
    d.config.delivery = s.text == "exactly-once" ? Delivery::exactly_once : Delivery::at_least_once;
  };
  delivery.show = [](const Draft& d) {
    return std::string(d.config.delivery == Delivery::exactly_once ? "exactly-once" : "at-least-once");
  };
  v.push_back(std::move(delivery));
  v.push_back(flag<Draft>(
      "checkpoint.enabled",
      "Keep a durable checkpoint in Kafka (checkpoint.topic) and skip, on start, the transactions it covers. "
      "Required by exactly-once.",
      [](auto& d) -> auto& { return d.config.checkpoint.enabled; }));
  v.push_back(text<Draft>(
      "checkpoint.topic", "topic",
      "Compacted topic holding one checkpoint per slot, keyed by system identifier, database and slot; created "
      "with cleanup.policy=compact when missing and allowed.",
      [](auto& d) -> auto& { return d.config.checkpoint.topic; }, check_topic_name));
  auto signing_key = base<Draft>(
      "checkpoint.signing_key", "string (secret)",
      "HMAC-SHA256 key (at least 32 bytes, e.g. `openssl rand -hex 32`) that signs every checkpoint, so that only "
      "a checkpoint this pgoutbox wrote can make it skip anything (docs/spec.md I11). Without one, checkpoints are "
      "written but never trusted: a Postgres crash then republishes from the slot's position. Required by "
      "exactly-once. Kept out of the file; it wins over checkpoint.signing_key_file.");
  signing_key.secret = true;
  signing_key.in_file = false;
  signing_key.set = [](Draft& d, const Scalar& s) {
    // As from checkpoint.signing_key_file: one secret mounted as a file on one replica and as a
    // variable on another must give one key (a variable filled from a file keeps its newline).
    std::string key = s.text;
    while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
    if (key.empty()) throw Invalid("is empty; unset the variable instead");
    d.config.checkpoint.signing_key = std::move(key);
  };
  signing_key.show = [](const Draft& d) {
    return d.config.checkpoint.signing_key.empty() ? std::string() : std::string(kRedacted);
  };
  v.push_back(std::move(signing_key));
  auto signing_key_file = base<Draft>(
      "checkpoint.signing_key_file", "path",
      "File holding checkpoint.signing_key (a mounted secret); trailing newlines are dropped. Relative to the "
      "configuration file's folder. Refused when group or others may write it, or another user than root or "
      "pgoutbox's owns it, unless it is on a read-only mount.");
  signing_key_file.nullable = true;
  signing_key_file.described = false;
  signing_key_file.set = [](Draft& d, const Scalar& s) {
    if (s.null) {
      d.signing_key_file.reset();
      return;
    }
    if (s.text.empty()) throw Invalid("must not be empty");
    d.signing_key_file = s.text;
  };
  signing_key_file.show = [](const Draft& d) { return d.signing_key_file.value_or(""); };
  v.push_back(std::move(signing_key_file));
  v.push_back(duration<Draft>(
      "checkpoint.interval",
      "At-least-once: how often at most the checkpoint is written (and at shutdown). After a Postgres crash, "
      "about this much is published again.",
      [](auto& d) -> auto& { return d.config.checkpoint.interval; }));
  v.push_back(text<Draft>(
      "kafka.transactional_id", "string",
      "Exactly-once: the producer's transactional.id; empty derives pgoutbox-<system identifier>-<database>-<slot> "
      "(with '-' and '%' in the database name percent-encoded). Every instance of one slot must use the same, and no "
      "two slots one; an explicit id may not begin with pgoutbox- and a digit, nor end with -alt or -check, and is at "
      "most 1,024 bytes (it goes into every checkpoint).",
      [](auto& d) -> auto& { return d.config.kafka.transactional_id; },
      [](std::string_view value) {
        if (const auto why = transactional_id_collision(value))
          throw Invalid(fmt::format("{} (got {})", *why, quote(value)));
      }));
  v.push_back(duration<Draft>(
      "kafka.transaction_interval",
      "Exactly-once: how long one Kafka transaction collects whole Postgres transactions before it is committed.",
      [](auto& d) -> auto& { return d.config.kafka.transaction_interval; }));
  v.push_back(flag<Draft>(
      "kafka.alternate_producers",
      "Exactly-once: two transactional producers, with kafka.transactional_id and the same id followed by -alt, "
      "take turns, one Kafka transaction each: a transaction never waits for the coordinator to finish writing the "
      "previous commit's markers (Kafka refuses the same id until then, and librdkafka retries after 20 ms). Off: one "
      "producer, for a broker whose ACLs grant the one transactional id only. Either way both ids are initialised at "
      "start (the -alt one where the ACLs allow), so an older instance configured otherwise is fenced.",
      [](auto& d) -> auto& { return d.config.kafka.alternate_producers; }));

  v.push_back(flag<Draft>(
      "kafka.send_when_caught_up",
      "When the replication stream is caught up, send what is queued at once instead of waiting out linger.ms: "
      "batches while a backlog drains, lowest latency at low rates. Off: linger.ms always applies (fewer, fuller "
      "requests at low rates). Exactly-once ignores it: it commits when caught up, and a commit always sends its last "
      "records at once.",
      [](auto& d) -> auto& { return d.config.kafka.send_when_caught_up; }));

  v.push_back(duration<Draft>(
      "shutdown_timeout",
      "On SIGTERM or SIGINT, how long to wait for Kafka to acknowledge what is in flight "
      "before exiting without confirming it.",
      [](auto& d) -> auto& { return d.config.shutdown_timeout; }));

  auto metrics = text<Draft>(
      "metrics_address", "host:port", "Where /metrics, /healthz and /readyz listen; empty or null turns them off.",
      [](auto& d) -> auto& { return d.config.metrics_address; },
      [](std::string_view value) {
        if (!value.empty()) check_address(value);
      });
  metrics.nullable = true;
  const auto set_metrics = metrics.set;
  metrics.set = [set_metrics](Draft& d, const Scalar& s) { set_metrics(d, s.null ? Scalar{} : s); };
  v.push_back(std::move(metrics));

  auto allowed_hosts = base<Draft>(
      "metrics_allowed_hosts", "host names",
      "Comma-separated host names (no port) that /metrics, /healthz and /readyz answer as the request's Host, besides "
      "IP addresses and localhost, e.g. the name Prometheus scrapes (a compose service, a Kubernetes Service's DNS "
      "name). A request with any other Host gets 421: a web page cannot read the port by DNS rebinding.");
  allowed_hosts.set = [](Draft& d, const Scalar& s) { d.config.metrics_allowed_hosts = parse_host_names(s.text); };
  allowed_hosts.show = [](const Draft& d) {
    return fmt::format("{}", fmt::join(d.config.metrics_allowed_hosts, ", "));
  };
  v.push_back(std::move(allowed_hosts));

  v.push_back(count<Draft>(
      "metrics_topic_labels",
      "How many distinct topics get metric series of their own (label topic); events of further topics are counted "
      "under topic=\"other\". Topics come from row values, so this bounds /metrics. Every series is also labelled by "
      "its table.",
      [](auto& d) -> auto& { return d.config.metrics_topic_labels; }, true, kMaxTopicLabels));

  v.push_back(choice<Draft>("log_format", "auto writes JSON lines unless stderr is a terminal.",
                            [](auto& d) -> auto& { return d.config.log_format; }, {"auto", "json", "text"}));
  v.push_back(choice<Draft>("log_level", "Least severe level that is logged.",
                            [](auto& d) -> auto& { return d.config.log_level; },
                            {"trace", "debug", "info", "warn", "error"}));
  return v;
}

// format.*: the same keys for a table and a message outbox (their words differ: a table's
// templates name columns, a message outbox's name envelope fields).
template <class T>
void add_format_entries(std::vector<Entry<T>>& v) {
  constexpr bool kTable = std::is_same_v<T, TableConfig>;
  const std::string ref = kTable ? "${column}" : "${field}";
  const std::string source_default = kTable ? "/<database>/<schema>.<table>" : "/<database>/messages/<prefix>";
  static const std::vector<std::pair<std::string, Format>> kFormats = {
      {"string", Format::string},
      {"debezium-json", Format::debezium_json},
      {"cloudevents-binary", Format::cloudevents_binary},
      {"cloudevents-structured", Format::cloudevents_structured}};
  auto format = base<T>(
      "format.type", "one of string, debezium-json, cloudevents-binary, cloudevents-structured",
      std::string("The bytes of each record's key and value (docs/migrating.md, Record formats). string: ") +
          (kTable ? "the key column's text and the payload as stored. debezium-json: what Debezium's outbox event "
                    "router writes through Kafka Connect's JsonConverter, the key and the value each typed by its "
                    "column. "
                  : "the key's text and the payload as the string format of a message outbox writes it. "
                    "debezium-json: what Debezium writes with DecodeLogicalDecodingMessageContent and the outbox "
                    "event router through Kafka Connect's JsonConverter, the key and the value typed as Debezium "
                    "infers them from the envelope. ") +
          "cloudevents-binary: a CloudEvent in the Kafka binding's binary mode (ce_ headers, the payload as the "
          "value); cloudevents-structured: in structured mode (an application/cloudevents+json value whose data is "
          "the payload).");
  format.set = [](T& t, const Scalar& s) {
    check_choice(s.text, {"string", "debezium-json", "cloudevents-binary", "cloudevents-structured"});
    for (const auto& [name, value] : kFormats) {
      if (name == s.text) t.format.type = value;
    }
  };
  format.show = [](const T& t) {
    for (const auto& [name, value] : kFormats) {
      if (value == t.format.type) return name;
    }
    return std::string("string");
  };
  v.push_back(std::move(format));
  v.push_back(flag<T>(
      "format.schemas",
      "debezium-json: JsonConverter's schemas.enable. true: each key and value is {\"schema\": …, \"payload\": …}; "
      "false: the payload alone.",
      [](auto& t) -> auto& { return t.format.schemas; }));
  v.push_back(flag<T>(
      "format.expand_json_payload",
      "debezium-json: the router's table.expand.json.payload. A payload that is a string holding a JSON object is "
      "written as a struct with the schema Debezium infers from it; anything else stays as it is.",
      [](auto& t) -> auto& { return t.format.expand_json_payload; }));
  v.push_back(text<T>(
      "format.source", "URI reference",
      std::string("CloudEvents: the source attribute (ce_source) of every event. Empty: ") + source_default +
          ", the database named by postgres.dsn.",
      [](auto& t) -> auto& { return t.format.source; }, [](std::string_view) {}));
  v.push_back(text<T>(
      "format.event_type", "type template",
      "CloudEvents: the type attribute (ce_type); each " + ref + " is replaced by that " +
          (kTable ? "column's" : "envelope field's") + " text, e.g. com.example.${aggregatetype}.${type}. Empty: " +
          (kTable ? "the value of columns.type" : "the value of fields.type") +
          ", which must then be set. An event whose type comes out empty is poison NULL_EVENT_TYPE.",
      [](auto& t) -> auto& { return t.format.event_type; },
      [](std::string_view value) {
        if (value.empty()) return;
        try {
          parse_topic_template(value);
        } catch (const std::invalid_argument& e) {
          throw Invalid(fmt::format("{} (got {})", e.what(), quote(value)));
        }
      }));
  v.push_back(flag<T>(
      "format.subject_from_key",
      "CloudEvents: the subject attribute (ce_subject) is the record key (the aggregate id).",
      [](auto& t) -> auto& { return t.format.subject_from_key; }));
}

std::vector<Entry<TableConfig>> make_table_entries() {
  std::vector<Entry<TableConfig>> v;

  auto table = base<TableConfig>("table", "table name",
                                 "The outbox table, schema.table with Postgres's rules: unquoted names fold to lower "
                                 "case, \"quoted\" ones keep case and may hold dots; no schema means public.");
  table.required = true;
  table.set = [](TableConfig& t, const Scalar& s) {
    auto name = parse_table_name(s.text);
    t.schema = std::move(name.schema);
    t.name = std::move(name.name);
  };
  table.show = [](const TableConfig& t) {
    return t.name.empty() ? std::string() : format_table_name(t.schema, t.name);
  };
  v.push_back(std::move(table));

  v.push_back(text<TableConfig>(
      "topic", "topic template",
      "Destination topic; each ${column} is replaced by that column's text (the column must "
      "exist; pgoutbox check verifies it).",
      [](auto& t) -> auto& { return t.topic; },
      [](std::string_view value) {
        try {
          parse_topic_template(value);
        } catch (const std::invalid_argument& e) {
          throw Invalid(fmt::format("{} (got {})", e.what(), quote(value)));
        }
      }));

  v.push_back(text<TableConfig>(
      "topic_pattern", "regular expression",
      "Allow-list for the expanded topic (ECMAScript syntax, matched against the whole "
      "name); a row whose topic does not match is poison INVALID_TOPIC and never reaches "
      "Kafka. Empty: any name Kafka accepts ([A-Za-z0-9._-], 1 to 249 bytes).",
      [](auto& t) -> auto& { return t.topic_pattern; },
      [](std::string_view value) {
        try {
          std::regex(value.begin(), value.end());
        } catch (const std::regex_error& e) {
          throw Invalid(fmt::format("is not a valid regular expression: {} (got {})", e.what(), quote(value)));
        }
      }));

  auto null_payload = base<TableConfig>(
      "null_payload", "one of poison, tombstone, json-null",
      "A row whose payload is NULL: poison sends it through the poison policy (SPEC I8), tombstone publishes a "
      "record with a null value, json-null (format.type debezium-json) publishes the format's null value as "
      "Debezium's router does unless route.tombstone.on.empty.payload.");
  null_payload.set = [](TableConfig& t, const Scalar& s) {
    check_choice(s.text, {"poison", "tombstone", "json-null"});
    t.null_payload = s.text == "tombstone"   ? NullPayload::tombstone
                     : s.text == "json-null" ? NullPayload::json_null
                                             : NullPayload::poison;
  };
  null_payload.show = [](const TableConfig& t) {
    return std::string(t.null_payload == NullPayload::tombstone   ? "tombstone"
                       : t.null_payload == NullPayload::json_null ? "json-null"
                                                                  : "poison");
  };
  v.push_back(std::move(null_payload));

  v.push_back(flag<TableConfig>(
      "validate_json",
      "Check that each payload is valid JSON (for text and bytea payload columns; json and "
      "jsonb are valid by construction). A payload that is not is poison.",
      [](auto& t) -> auto& { return t.validate_json; }));

  add_format_entries(v);

  v.push_back(column(
      "columns.id", "Column with the event id; becomes header id (consumers deduplicate by it).",
      [](auto& t) -> auto& { return t.columns.id; }));
  v.push_back(column(
      "columns.aggregate_type", "Column with the routing value, usually referenced by the topic template.",
      [](auto& t) -> auto& { return t.columns.aggregate_type; }));
  v.push_back(column(
      "columns.aggregate_id", "Column with the record key (per-key order is kept).",
      [](auto& t) -> auto& { return t.columns.aggregate_id; }));
  v.push_back(column(
      "columns.payload", "Column with the record value: json, jsonb, text or bytea.",
      [](auto& t) -> auto& { return t.columns.payload; }));

  auto type = optional_column(
      "columns.type",
      "Column with the event type, sent as header type. The default column is skipped when "
      "the table lacks it; a column named here must exist. null: none.",
      [](auto& t) -> auto& { return t.columns.type; });
  const auto set_type = type.set;
  type.set = [set_type](TableConfig& t, const Scalar& s) {
    set_type(t, s);
    t.type_column_explicit = !s.null;
  };
  v.push_back(std::move(type));

  v.push_back(optional_column(
      "columns.headers", "json or jsonb object column; each key becomes a header (e.g. traceparent). null: none.",
      [](auto& t) -> auto& { return t.columns.headers; }));
  v.push_back(optional_column(
      "columns.timestamp", "Column with the record timestamp; null: the commit time.",
      [](auto& t) -> auto& { return t.columns.timestamp; }));

  v.push_back(text<TableConfig>(
      "backfill.where", "SQL predicate",
      "When pgoutbox creates the slot: publish the rows already in the table that match this predicate (e.g. "
      "status = 'NEW'), read in the slot's own snapshot, before streaming from the slot. Each row is published "
      "once, from the snapshot or from the stream. One expression: no ';', comment, set operation or ')' closing "
      "WHERE's parenthesis; checked by PostgreSQL (PREPARE) before the slot is created. Empty: none.",
      [](auto& t) -> auto& { return t.backfill.where; },
      [](std::string_view value) {
        if (value.empty()) return;
        if (const auto problem = predicate_problem(value); !problem.empty())
          throw Invalid(fmt::format("{} (got {})", problem, quote(value)));
      }));
  v.push_back(text<TableConfig>(
      "backfill.order_by", "column",
      "Column the backfill reads rows in (and Kafka receives them in); empty: columns.id.",
      [](auto& t) -> auto& { return t.backfill.order_by; },
      [](std::string_view value) {
        if (!value.empty()) check_column(value);
      }));
  v.push_back(count<TableConfig>(
      "backfill.chunk_rows",
      "Rows fetched at a time from the backfill's cursor: the most rows pgoutbox holds in memory while it reads.",
      [](auto& t) -> auto& { return t.backfill.chunk_rows; }, false, 1'000'000));
  v.push_back(duration<TableConfig>(
      "backfill.statement_timeout",
      "PostgreSQL's statement_timeout for each query the backfill and pgoutbox republish run with the predicate "
      "(the count, each fetch): a slow predicate stops there instead of holding a snapshot open.",
      [](auto& t) -> auto& { return t.backfill.statement_timeout; }));
  return v;
}

// An envelope field name: any non-empty JSON key (the envelope is the application's own JSON).
void check_field(std::string_view text) {
  if (text.empty()) throw Invalid("must name an envelope field");
}

template <class Access>
Entry<MessageConfig> field(std::string path, std::string description, Access access) {
  return text<MessageConfig>(std::move(path), "field", std::move(description), access, check_field);
}

template <class Access>
Entry<MessageConfig> optional_field(std::string path, std::string description, Access access) {
  auto e = base<MessageConfig>(std::move(path), "field or null", std::move(description));
  e.nullable = true;
  e.set = [access](MessageConfig& m, const Scalar& s) {
    if (s.null) {
      access(m).reset();
      return;
    }
    check_field(s.text);
    access(m) = s.text;
  };
  e.show = [access](const MessageConfig& m) { return access(m) ? *access(m) : std::string("null"); };
  return e;
}

std::vector<Entry<MessageConfig>> make_message_entries() {
  std::vector<Entry<MessageConfig>> v;

  auto prefix = text<MessageConfig>(
      "prefix", "string",
      "The prefix the application passes to pg_logical_emit_message, matched exactly; one entry per prefix.",
      [](auto& m) -> auto& { return m.prefix; },
      [](std::string_view value) {
        if (value.empty()) throw Invalid("must not be empty");
      });
  prefix.required = true;
  v.push_back(std::move(prefix));

  v.push_back(text<MessageConfig>(
      "topic", "topic template",
      "Destination topic; each ${field} is replaced by that envelope field's text (a string, or a number as "
      "written). A message whose field is missing or empty is poison NULL_ROUTING_VALUE.",
      [](auto& m) -> auto& { return m.topic; },
      [](std::string_view value) {
        try {
          parse_topic_template(value);
        } catch (const std::invalid_argument& e) {
          throw Invalid(fmt::format("{} (got {})", e.what(), quote(value)));
        }
      }));

  v.push_back(text<MessageConfig>(
      "topic_pattern", "regular expression",
      "Allow-list for the expanded topic, as tables[].topic_pattern; a message whose topic does not match is poison "
      "INVALID_TOPIC.",
      [](auto& m) -> auto& { return m.topic_pattern; },
      [](std::string_view value) {
        try {
          std::regex(value.begin(), value.end());
        } catch (const std::regex_error& e) {
          throw Invalid(fmt::format("is not a valid regular expression: {} (got {})", e.what(), quote(value)));
        }
      }));

  v.push_back(field(
      "fields.id", "Envelope field with the event id (string or number); becomes header id. Missing: poison NULL_ID.",
      [](auto& m) -> auto& { return m.fields.id; }));
  v.push_back(field(
      "fields.aggregate_type", "Envelope field with the routing value, usually referenced by the topic template.",
      [](auto& m) -> auto& { return m.fields.aggregate_type; }));
  v.push_back(field(
      "fields.aggregate_id", "Envelope field with the record key (per-key order is kept); missing or null: no key.",
      [](auto& m) -> auto& { return m.fields.aggregate_id; }));
  v.push_back(field(
      "fields.payload",
      "Envelope field with the record value: a JSON object or array is sent as its JSON text, a string as the "
      "string's bytes. Missing or null: poison NULL_PAYLOAD.",
      [](auto& m) -> auto& { return m.fields.payload; }));
  v.push_back(optional_field(
      "fields.type", "Envelope field with the event type, sent as header type when present. null: none.",
      [](auto& m) -> auto& { return m.fields.type; }));
  v.push_back(optional_field(
      "fields.headers",
      "Envelope field holding an object; each key becomes a header (string values as they are, others as JSON). "
      "null: none.",
      [](auto& m) -> auto& { return m.fields.headers; }));
  add_format_entries(v);
  return v;
}

}  // namespace

const std::vector<Entry<MessageConfig>>& message_entries() {
  static const auto entries = make_message_entries();
  return entries;
}

const std::vector<Entry<Draft>>& global_entries() {
  static const auto entries = make_global_entries();
  return entries;
}

const std::vector<Entry<TableConfig>>& table_entries() {
  static const auto entries = make_table_entries();
  return entries;
}

}  // namespace pgoutbox::config::detail
