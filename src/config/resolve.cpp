// Checks that need the file and the environment merged: required keys, secrets from files,
// librdkafka properties, and rules across keys.

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>

#include "dsn.h"
#include "file_read.h"
#include "loader_state.h"
#include "pgoutbox/config/kafka_properties.h"
#include "pgoutbox/config/redact.h"
#include "pgoutbox/config/topic_template.h"
#include "table_name.h"
#include "values.h"

namespace pgoutbox::config::detail {
namespace {

// A secret is a line, not a document: anything larger is the wrong file.
constexpr std::size_t kMaxSecretBytes = 64 * 1024;

// Why the signing key's file is refused when someone else can write it (SECURITY.md "Checkpoint").
constexpr std::string_view kSigningKeyWriters =
    "whoever writes the signing key can sign checkpoints that make exactly-once skip events";

constexpr std::string_view kFileSuffix = "_file";

bool is_file_variant(const std::string& name) {
  return name.size() > kFileSuffix.size() && name.ends_with(kFileSuffix);
}
std::string without_file_suffix(const std::string& name) { return name.substr(0, name.size() - kFileSuffix.size()); }

bool dsn_has_password(const std::string& dsn) {
  for (const auto& [keyword, value] : scan_dsn(dsn).params) {
    if (keyword == "password" && !value.empty()) return true;
  }
  return false;
}

// password= or sslpassword= (or a URI's user:password@), even empty: the file holds no secret.
std::optional<std::string> dsn_secret_keyword(const std::string& dsn) {
  for (const auto& [keyword, value] : scan_dsn(dsn).params) {
    if (is_secret_dsn_keyword(keyword)) return keyword;
  }
  return std::nullopt;
}

}  // namespace

std::string Loader::read_secret_file(const std::string& path, const Origin& origin, const std::string& key,
                                     const std::string& if_written) {
  std::filesystem::path full(path);
  if (full.is_relative() && !origin.base_dir.empty()) full = std::filesystem::path(origin.base_dir) / full;
  std::error_code ec;
  if (std::filesystem::is_directory(full, ec))
    fail(origin, key, fmt::format("{} is a folder, not a file", full.string()));
  auto read = read_file(full.string(), kMaxSecretBytes);
  switch (read.failure) {
    case FileContent::Failure::none:
      break;
    case FileContent::Failure::open:
    case FileContent::Failure::read:
      fail(origin, key, fmt::format("cannot read {}: {}", full.string(), std::strerror(read.error)));
    case FileContent::Failure::too_large:
    case FileContent::Failure::not_regular:
      fail(origin, key, fmt::format("{} {}", full.string(), read.describe(kMaxSecretBytes)));
  }
  if (!if_written.empty()) {
    if (auto refusal = write_refusal(full.string(), read, if_written); !refusal.empty()) fail(origin, key, refusal);
  }
  // As libpq does for ~/.pgpass: a secret others can read is a secret no longer. Warned, not
  // refused, because mounted secrets (Docker's, Kubernetes' default mode) are often 0444/0644
  // inside a container nobody else shares.
  if (const auto who = readable_by(read.mode); !who.empty()) {
    draft_.config.warnings.push_back(
        fmt::format("{}: {} is readable by {} (mode {:04o}); make it readable by pgoutbox's user only: chmod 600 {}",
                    key, full.string(), who, read.mode & 07777, full.string()));
  }
  std::string content = std::move(read.text);
  // Files written by `echo` or editors end in a newline the secret does not contain.
  while (!content.empty() && (content.back() == '\n' || content.back() == '\r')) content.pop_back();
  if (content.empty()) fail(origin, key, fmt::format("{} is empty", full.string()));
  return content;
}

void Loader::check_required() {
  for (const auto& e : global_entries()) {
    if (!e.required || e.shape != Shape::scalar || origins_.contains(e.path)) continue;
    fail(file_origin(), e.path, fmt::format("is required; set it in the file or in {}", env_name(e.path)));
  }
  const std::string tables_key(kTablesPath);
  if (draft_.config.tables.empty() && draft_.config.messages.empty()) {
    const auto it = origins_.find(tables_key);
    fail(it != origins_.end() ? it->second : file_origin(), tables_key,
         "must list at least one outbox table (or messages one message outbox), e.g.\n  tables:\n    - table: "
         "public.outbox");
  }
  for (std::size_t i = 0; i < draft_.config.tables.size(); ++i) {
    const std::string table = fmt::format("{}[{}]", kTablesPath, i);
    for (const auto& e : table_entries()) {
      if (!e.required || origins_.contains(table + "." + e.path)) continue;
      fail(origins_.at(table), table + "." + e.path,
           fmt::format("is required; set it in the file or in {}{}_{}", kTablesEnvPrefix, i, table_env_suffix(e.path)));
    }
  }
  for (std::size_t i = 0; i < draft_.config.messages.size(); ++i) {
    const std::string entry = fmt::format("{}[{}]", kMessagesPath, i);
    for (const auto& e : message_entries()) {
      if (!e.required || origins_.contains(entry + "." + e.path)) continue;
      fail(origins_.at(entry), entry + "." + e.path,
           fmt::format("is required; set it in the file or in {}{}_{}", kMessagesEnvPrefix, i,
                       table_env_suffix(e.path)));
    }
  }
}

void Loader::resolve_password() {
  const auto from_env = origins_.find("postgres.password");
  const auto file_key = origins_.find("postgres.password_file");
  auto& postgres = draft_.config.postgres;
  if (from_env != origins_.end() && file_key != origins_.end() && file_key->second.from_env && draft_.password_file) {
    fail(file_key->second, "postgres.password_file", "is set as well as PGOUTBOX_POSTGRES_PASSWORD; set only one");
  }
  // The environment wins over a file named in the configuration: it is the deployment's say.
  if (from_env == origins_.end() && draft_.password_file) {
    postgres.password = read_secret_file(*draft_.password_file, file_key->second, "postgres.password_file");
  }
  if (!postgres.password.empty() && dsn_has_password(postgres.dsn)) {
    fail(origins_.at("postgres.dsn"), "postgres.dsn",
         fmt::format("holds a password and {} gives one too; keep only one",
                     from_env != origins_.end() ? "PGOUTBOX_POSTGRES_PASSWORD" : "postgres.password_file"));
  }
  // Secrets never come from the configuration file (docs/security.md "Secrets"), wherever they sit in it:
  // in either connection string (primary_dsn connects with the same postgres.password).
  for (const std::string key : {"postgres.dsn", "postgres.primary_dsn"}) {
    const auto origin = origins_.find(key);
    if (origin == origins_.end() || origin->second.from_env) continue;
    const std::string& dsn = key == "postgres.dsn" ? postgres.dsn : postgres.primary_dsn;
    if (const auto keyword = dsn_secret_keyword(dsn)) {
      fail(origin->second, key,
           fmt::format("holds a {} (a secret), and secrets are not read from the configuration file; remove it and {}",
                       *keyword,
                       *keyword == "password"
                           ? "set PGOUTBOX_POSTGRES_PASSWORD (or name a file in postgres.password_file)"
                           : fmt::format("give the whole DSN in {}", env_name(key))));
    }
  }
}

void Loader::resolve_signing_key() {
  const auto from_env = origins_.find("checkpoint.signing_key");
  const auto file_key = origins_.find("checkpoint.signing_key_file");
  auto& checkpoint = draft_.config.checkpoint;
  if (from_env != origins_.end() && file_key != origins_.end() && file_key->second.from_env &&
      draft_.signing_key_file) {
    fail(file_key->second, "checkpoint.signing_key_file",
         "is set as well as PGOUTBOX_CHECKPOINT_SIGNING_KEY; set only one");
  }
  // The environment wins over a file named in the configuration, as for the password.
  if (from_env == origins_.end() && draft_.signing_key_file) {
    checkpoint.signing_key = read_secret_file(*draft_.signing_key_file, file_key->second, "checkpoint.signing_key_file",
                                              std::string(kSigningKeyWriters));
  }
  if (!checkpoint.signing_key.empty() && checkpoint.signing_key.size() < CheckpointConfig::kMinSigningKeyBytes) {
    const bool env = from_env != origins_.end();
    fail(env ? from_env->second : file_key->second, env ? "checkpoint.signing_key" : "checkpoint.signing_key_file",
         fmt::format("is {} bytes long; a signing key needs at least {} (e.g. the output of `openssl rand -hex 32`)",
                     checkpoint.signing_key.size(), CheckpointConfig::kMinSigningKeyBytes));
  }
}

void Loader::resolve_properties() {
  const std::string path(kPropertiesPath);
  // Within one layer, a value and its file variant contradict each other.
  for (const auto* layer : {&file_properties_, &env_properties_}) {
    for (const auto& [name, property] : *layer) {
      if (is_file_variant(name) && layer->contains(without_file_suffix(name))) {
        fail(property.origin, fmt::format("{}.{}", path, name),
             fmt::format("is set as well as {}; set only one", without_file_suffix(name)));
      }
    }
  }
  // Secret properties never come from the configuration file, whatever overrides them.
  for (const auto& [name, property] : file_properties_) {
    if (is_file_variant(name) || !is_secret_property(name)) continue;
    fail(property.origin, fmt::format("{}.{}", path, name),
         fmt::format("is a secret and is not read from the configuration file; set {} or name a file in {}.{}_file",
                     env_name("kafka.property." + name), path, name));
  }
  // The environment replaces a property and its file variant alike.
  auto merged = file_properties_;
  for (const auto& [name, property] : env_properties_) {
    const std::string base = is_file_variant(name) ? without_file_suffix(name) : name;
    merged.erase(base);
    merged.erase(base + std::string(kFileSuffix));
    merged[name] = property;
  }
  auto& properties = draft_.config.kafka.properties;
  for (const auto& [name, property] : merged) {
    const std::string shown = fmt::format("{}.{}", path, name);
    if (is_file_variant(name)) {
      const std::string base = without_file_suffix(name);
      if (!is_secret_property(base)) {
        fail(property.origin, shown,
             fmt::format("only secret properties are read from files; set {} itself (librdkafka's *.location "
                         "properties take paths)",
                         base));
      }
      if (property.value.empty()) fail(property.origin, shown, "must name a file");
      properties[base] = read_secret_file(property.value, property.origin, shown);
      continue;
    }
    if (is_secret_property(name) && property.value.empty()) fail(property.origin, shown, "is empty");
    properties[name] = property.value;
  }

  // SPEC I1/I4 rest on an idempotent producer waiting for all in-sync replicas; the kafka module
  // enforces the same, but here the error can point at the line.
  const auto origin_of = [&](const std::string& name) {
    const auto it = merged.find(name);
    return it != merged.end() ? it->second.origin : merged.at(name + std::string(kFileSuffix)).origin;
  };
  for (const std::string name : {"bootstrap.servers", "metadata.broker.list"}) {
    if (properties.contains(name))
      fail(origin_of(name), fmt::format("{}.{}", path, name), "duplicates kafka.brokers; set the brokers there");
  }
  for (const auto& [name, value] : properties) {
    if (const auto refusal = refuse_kafka_property(name, value)) {
      fail(origin_of(name), fmt::format("{}.{}", path, name), fmt::format("{} (got {})", *refusal, quote(value)));
    }
  }
  // The transactional producer is pgoutbox's to configure (delivery: exactly-once), with an id
  // every instance of the slot shares; a property would bypass both.
  if (properties.contains("transactional.id")) {
    fail(origin_of("transactional.id"), fmt::format("{}.transactional.id", path),
         "is set by pgoutbox; use delivery: exactly-once, and kafka.transactional_id to choose the id");
  }
  // The producer's queue holds what is in flight; unbounded, it is unbounded memory.
  for (const auto& [name, ceiling] : {std::pair<std::string, std::uint64_t>{"queue.buffering.max.messages", 10'000'000},
                                      std::pair<std::string, std::uint64_t>{"queue.buffering.max.kbytes", 2'097'151}}) {
    const auto it = properties.find(name);
    if (it == properties.end()) continue;
    std::uint64_t value = 0;
    try {
      value = parse_count(it->second);
    } catch (const Invalid&) {}
    if (value == 0 || value > ceiling) {
      fail(origin_of(name), fmt::format("{}.{}", path, name),
           fmt::format("must be a whole number from 1 to {} (got {})", ceiling, quote(it->second)));
    }
  }
  // librdkafka's own queue must hold what the relay lets be in flight (limits.*), or a full
  // queue would stall sending well before backpressure engages.
  const auto& limits = draft_.config.limits;
  const auto below = [&](const std::string& name, std::uint64_t needed, std::uint64_t unit, const char* cap) {
    const auto it = properties.find(name);
    if (it == properties.end()) return;
    std::uint64_t value = 0;
    try {
      value = std::stoull(it->second);
    } catch (const std::exception&) {
      return;  // librdkafka refuses what is not a number, naming the property
    }
    if (value * unit < needed) {
      fail(origin_of(name), fmt::format("{}.{}", path, name),
           fmt::format("must hold at least limits.{} ({}{}) (got {}); raise it or lower the limit", cap,
                       (needed + unit - 1) / unit, unit == 1 ? "" : " KiB", quote(it->second)));
    }
  };
  below("queue.buffering.max.messages", limits.max_in_flight_records, 1, "max_in_flight_records");
  below("queue.buffering.max.kbytes", limits.max_in_flight_bytes, 1024, "max_in_flight_bytes");
}

// The database postgres.dsn names (libpq's default: the user's name, else postgres).
std::string Loader::database_name() const {
  std::string database, user;
  for (const auto& [keyword, value] : scan_dsn(draft_.config.postgres.dsn).params) {
    if (keyword == "dbname") database = value;
    if (keyword == "user") user = value;
  }
  if (!database.empty()) return database;
  return user.empty() ? "postgres" : user;
}

// A table's or a message outbox's format: expanding belongs to debezium-json; a CloudEvent
// needs a type, and its source is /<database><source_path> by default.
void Loader::check_format(FormatConfig& format, bool has_type_source, const std::string& type_key,
                          const std::string& reference, const std::string& source_path,
                          const std::function<void(const std::string&, const std::string&)>& fail_at) {
  if (format.type != Format::debezium_json && format.expand_json_payload) {
    fail_at("format.expand_json_payload", "expanding the payload needs format.type debezium-json");
  }
  if (!format.cloudevents()) return;
  if (format.event_type.empty() && !has_type_source) {
    fail_at("format.event_type", "a CloudEvent needs a type: set format.event_type (a template of " + reference +
                                     " references) or " + type_key);
  }
  if (format.source.empty()) format.source = "/" + database_name() + source_path;
}

void Loader::check_tables() {
  auto& tables = draft_.config.tables;
  const auto& slot = draft_.config.postgres.slot;
  for (std::size_t i = 0; i < tables.size(); ++i) {
    // Postgres would refuse the marker slot only after the slot itself exists, its snapshot
    // gone with the failed start.
    if (tables[i].backfill.enabled() && slot.size() + kBackfillingSuffix.size() > kMaxNameBytes) {
      const std::string key = fmt::format("{}[{}].backfill.where", kTablesPath, i);
      fail(origins_.at("postgres.slot"), "postgres.slot",
           fmt::format("must be at most {} bytes with {} set: the backfill keeps its state in the slots {}{} and "
                       "{}{} (got {} bytes)",
                       kMaxNameBytes - kBackfillingSuffix.size(), key, slot, kBackfillingSuffix, slot,
                       kBackfilledSuffix, slot.size()));
    }
    const auto fail_at = [&](const std::string& field, const std::string& why) {
      const std::string key = fmt::format("{}[{}].{}", kTablesPath, i, field);
      const auto it = origins_.find(key);
      fail(it != origins_.end() ? it->second : file_origin(), key, why);
    };
    if (tables[i].null_payload == NullPayload::json_null && tables[i].format.type != Format::debezium_json) {
      fail_at("null_payload", "json-null is the format's null value: needs format.type debezium-json");
    }
    check_format(tables[i].format, tables[i].columns.type.has_value(), "columns.type", "${column}",
                 "/" + tables[i].schema + "." + tables[i].name, fail_at);
    for (std::size_t j = 0; j < i; ++j) {
      if (tables[i].schema == tables[j].schema && tables[i].name == tables[j].name) {
        const std::string key = fmt::format("{}[{}].table", kTablesPath, i);
        fail(origins_.at(key), key,
             fmt::format("names {} again (already {}[{}]); one table has one mapping",
                         format_table_name(tables[i].schema, tables[i].name), kTablesPath, j));
      }
    }
  }
}

void Loader::check_reserved_topics() {
  const auto& cfg = draft_.config;
  const auto check = [&](const std::string& entry, const std::string& topic, const std::string& pattern) {
    const auto problem = reserved_topic_problem(cfg, topic, pattern);
    if (problem.empty()) return;
    const std::string key = entry + ".topic";
    auto it = origins_.find(key);
    if (it == origins_.end()) it = origins_.find(entry);
    fail(it != origins_.end() ? it->second : file_origin(), key, problem);
  };
  for (std::size_t i = 0; i < cfg.tables.size(); ++i)
    check(fmt::format("{}[{}]", kTablesPath, i), cfg.tables[i].topic, cfg.tables[i].topic_pattern);
  for (std::size_t i = 0; i < cfg.messages.size(); ++i)
    check(fmt::format("{}[{}]", kMessagesPath, i), cfg.messages[i].topic, cfg.messages[i].topic_pattern);
}

void Loader::check_messages() {
  auto& messages = draft_.config.messages;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const auto fail_at = [&](const std::string& field, const std::string& why) {
      const std::string key = fmt::format("{}[{}].{}", kMessagesPath, i, field);
      const auto it = origins_.find(key);
      fail(it != origins_.end() ? it->second : file_origin(), key, why);
    };
    check_format(messages[i].format, messages[i].fields.type.has_value(), "fields.type", "${field}",
                 "/messages/" + messages[i].prefix, fail_at);
    for (std::size_t j = 0; j < i; ++j) {
      if (messages[i].prefix == messages[j].prefix) {
        const std::string key = fmt::format("{}[{}].prefix", kMessagesPath, i);
        fail(origins_.at(key), key,
             fmt::format("names prefix {} again (already {}[{}]); one prefix has one mapping",
                         quote(messages[i].prefix), kMessagesPath, j));
      }
    }
  }
}

void Loader::check_reconnect() {
  const auto& reconnect = draft_.config.reconnect;
  if (reconnect.min <= reconnect.max) return;
  const auto min_origin = origins_.find("reconnect.min");
  const auto max_origin = origins_.find("reconnect.max");
  if (min_origin != origins_.end()) {
    fail(min_origin->second, "reconnect.min",
         fmt::format("must not exceed reconnect.max ({}) (got {})", format_duration(reconnect.max),
                     format_duration(reconnect.min)));
  }
  fail(max_origin != origins_.end() ? max_origin->second : file_origin(), "reconnect.max",
       fmt::format("must be at least reconnect.min ({}) (got {})", format_duration(reconnect.min),
                   format_duration(reconnect.max)));
}

void Loader::check_delivery() {
  const auto& cfg = draft_.config;
  const auto origin_of = [&](const std::string& key) {
    const auto it = origins_.find(key);
    return it != origins_.end() ? it->second : file_origin();
  };
  if (cfg.delivery == Delivery::exactly_once && !cfg.checkpoint.enabled) {
    fail(origin_of("checkpoint.enabled"), "checkpoint.enabled",
         "must be true with delivery: exactly-once: the checkpoint is written in each Kafka transaction and read "
         "back on start to skip what is already committed");
  }
  if (cfg.delivery == Delivery::exactly_once && cfg.checkpoint.signing_key.empty()) {
    fail(origin_of("delivery"), "delivery",
         "exactly-once needs a checkpoint signing key: without one, anybody who can write to checkpoint.topic could "
         "make pgoutbox skip events (docs/spec.md I11). Set PGOUTBOX_CHECKPOINT_SIGNING_KEY or name a file in "
         "checkpoint.signing_key_file (at least 32 bytes, e.g. `openssl rand -hex 32 > key`), the same for every "
         "instance of the slot");
  }
  if (cfg.checkpoint.enabled && cfg.checkpoint.topic == cfg.poison.dead_letter_topic) {
    fail(origin_of("checkpoint.topic"), "checkpoint.topic",
         fmt::format("must differ from poison.dead_letter_topic (both {})", quote(cfg.checkpoint.topic)));
  }
  if (cfg.checkpoint.enabled && !in_checkpoint_namespace(cfg.checkpoint.topic)) {
    draft_.config.warnings.push_back(fmt::format(
        "checkpoint.topic {} is not named under {}: other pgoutbox relays on the cluster do not reserve it, so "
        "their rows could be routed into it. Name a slot's own checkpoint topic {}.<name> (docs/security.md)",
        quote(cfg.checkpoint.topic), kCheckpointTopicPrefix, kCheckpointTopicPrefix));
  }
  const auto positive = [&](const char* key, std::chrono::milliseconds value, std::chrono::milliseconds ceiling) {
    if (value.count() > 0 && value <= ceiling) return;
    fail(origin_of(key), key,
         fmt::format("must be more than 0 and at most {} (got {})", format_duration(ceiling), format_duration(value)));
  };
  positive("checkpoint.interval", cfg.checkpoint.interval, std::chrono::minutes(10));
  // Kafka aborts a transaction left open past transaction.timeout.ms (60 s by default).
  positive("kafka.transaction_interval", cfg.kafka.transaction_interval, std::chrono::seconds(10));
}

}  // namespace pgoutbox::config::detail
