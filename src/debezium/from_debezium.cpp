#include "pgoutbox/debezium/from_debezium.h"

#include <fmt/format.h>
#include <simdjson.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include "pgoutbox/config/config.h"
#include "pgoutbox/config/topic_template.h"

namespace pgoutbox::debezium {
namespace {

constexpr std::string_view kEventRouter = "io.debezium.transforms.outbox.EventRouter";
// Makes a logical decoding message's JSON content a struct the router reads (message outboxes).
constexpr std::string_view kMessageDecoder =
    "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent";
constexpr std::string_view kStringConverter = "org.apache.kafka.connect.storage.StringConverter";
constexpr std::string_view kJsonConverter = "org.apache.kafka.connect.json.JsonConverter";
// Debezium's defaults where they differ from pgoutbox's (PostgresConnectorConfig, EventRouterConfigDefinition).
constexpr std::string_view kDefaultSlot = "debezium";
constexpr std::string_view kDefaultPublication = "dbz_publication";
constexpr std::string_view kDefaultRouteRegex = "(?<routedByValue>.*)";
constexpr std::string_view kDefaultReplacement = "outbox.event.${routedByValue}";
// A placeholder for the brokers, which live in the Connect worker's properties, not the connector's.
constexpr std::string_view kBrokersPlaceholder = "localhost:9092";

// Settings with a known reason for staying behind; any other setting gets the generic one.
const std::map<std::string_view, std::string_view>& known_reasons() {
  static const std::map<std::string_view, std::string_view> reasons = {
      {"snapshot.mode",
       "pgoutbox takes no snapshot; on the same slot none is needed, on a new slot the rows committed before it are "
       "published with tables[].backfill"},
      {"heartbeat.interval.ms",
       "pgoutbox reports its position every postgres.status_interval, also when idle, and writes no heartbeat topic"},
      {"heartbeat.action.query", "pgoutbox runs no statements on the database"},
      {"heartbeat.topics.prefix", "pgoutbox writes no heartbeat topic"},
      {"signal.data.collection", "pgoutbox has no signal table (no ad hoc or incremental snapshots)"},
      {"signal.enabled.channels", "pgoutbox has no signal channels"},
      {"topic.prefix", "not needed: the EventRouter replaces the topic, and pgoutbox names it by tables[].topic"},
      {"database.server.name", "not needed: the EventRouter replaces the topic"},
      {"slot.drop.on.stop", "pgoutbox never drops its slot by itself (pgoutbox slot drop does, on request)"},
      {"publication.autocreate.mode",
       "the output uses the existing publication (postgres.create_publication: false); pgoutbox can create one only "
       "for its tables"},
      {"poll.interval.ms", "Debezium's queue; pgoutbox streams as rows arrive, bounded by limits.max_in_flight_*"},
      {"max.batch.size", "Debezium's queue; pgoutbox bounds memory with limits.max_in_flight_records"},
      {"max.queue.size", "Debezium's queue; pgoutbox bounds memory with limits.max_in_flight_records"},
      {"max.queue.size.in.bytes", "Debezium's queue; pgoutbox bounds memory with limits.max_in_flight_bytes"},
      {"skipped.operations", "pgoutbox relays inserts into the outbox table only; updates and deletes are ignored"},
      {"tombstones.on.delete", "pgoutbox ignores deletes of outbox rows"},
      {"provide.transaction.metadata", "pgoutbox writes no transaction topic"},
      {"errors.tolerance", "pgoutbox's poison.policy decides what happens to a row that cannot be published"},
      {"errors.log.enable", "pgoutbox logs every poison record"},
      {"errors.log.include.messages", "pgoutbox logs every poison record"},
      {"database.password", "secrets are not copied: set PGOUTBOX_POSTGRES_PASSWORD or postgres.password_file"},
      {"database.sslpassword",
       "secrets are not copied: give libpq an unencrypted key or sslpassword in a pgpass-like "
       "service file"},
      {"database.initial.statements", "pgoutbox runs no statements on the database"},
      {"schema.include.list", "pgoutbox relays the tables listed in tables[] only"},
      {"schema.exclude.list", "pgoutbox relays the tables listed in tables[] only"},
      {"table.exclude.list", "pgoutbox relays the tables listed in tables[] only"},
      {"column.include.list", "pgoutbox reads the role columns only"},
      {"column.exclude.list", "pgoutbox reads the role columns only"},
      {"predicates", "pgoutbox applies no Connect predicates"},
  };
  return reasons;
}

// Settings that need nothing in pgoutbox and whose absence changes nothing a consumer sees.
bool needs_nothing(std::string_view key) {
  return key == "connector.class" || key == "name" || key == "tasks.max" || key == "transforms" || key == "plugin.name";
}

// Java producer properties librdkafka knows under the same name with the same meaning.
bool same_in_librdkafka(std::string_view name) {
  static const std::set<std::string_view> names = {"linger.ms",
                                                   "compression.type",
                                                   "compression.level",
                                                   "batch.size",
                                                   "client.id",
                                                   "security.protocol",
                                                   "request.timeout.ms",
                                                   "retry.backoff.ms",
                                                   "retry.backoff.max.ms",
                                                   "max.in.flight.requests.per.connection",
                                                   "ssl.endpoint.identification.algorithm",
                                                   "sasl.kerberos.service.name",
                                                   "sasl.oauthbearer.token.endpoint.url",
                                                   "reconnect.backoff.ms",
                                                   "reconnect.backoff.max.ms",
                                                   "metadata.max.age.ms",
                                                   "socket.connection.setup.timeout.ms",
                                                   "sasl.username"};
  return names.contains(name);
}

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    std::string_view item = text.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) items.emplace_back(item);
    start = comma + 1;
  }
  return items;
}

// A libpq conninfo value, quoted unless it is plain (libpq's rules: '...' with \' and \\).
// conninfo_parse in fe-connect.c ends an unquoted value at any isspace() byte, \n \r \f \v
// included, so anything but a short list of plain characters is quoted: a connector's
// "database.sslkey": "/k\nhost=evil" must stay one value, never add keywords to the DSN.
std::string conninfo_value(std::string_view value) {
  if (value.find('\0') != std::string_view::npos) {
    // libpq reads the DSN as a C string: a NUL would end it inside the value.
    throw Unusable("a database.* setting holds a NUL character, which a libpq connection string cannot carry");
  }
  const auto plain = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("._-/:@+,%~").find(c) != std::string_view::npos;
  };
  if (!value.empty() && std::all_of(value.begin(), value.end(), plain)) return std::string(value);
  std::string out = "'";
  for (char c : value) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

bool is_plain_identifier(std::string_view name) {
  if (name.empty() || !((name[0] >= 'a' && name[0] <= 'z') || name[0] == '_')) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '$')) return false;
  }
  return true;
}

std::string sql_identifier(std::string_view name) {
  if (is_plain_identifier(name)) return std::string(name);
  std::string out = "\"";
  for (char c : name) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// One table.include.list entry, a Java regular expression matched against schema.table, as the
// table name pgoutbox takes; nullopt when it matches more than one literal name.
std::optional<std::string> literal_table(std::string_view pattern) {
  std::string literal;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size() && pattern[i + 1] == '.') {
      literal += '.';
      ++i;
    } else if (std::string_view("\\^$*+?()[]{}|").find(c) != std::string_view::npos) {
      return std::nullopt;
    } else {
      literal += c;  // an unescaped '.' matches itself too: the usual way of writing schema.table
    }
  }
  const std::size_t dot = literal.find('.');
  if (dot == std::string::npos || literal.find('.', dot + 1) != std::string::npos) return std::nullopt;
  return sql_identifier(literal.substr(0, dot)) + "." + sql_identifier(literal.substr(dot + 1));
}

class Converter {
 public:
  Converter(std::map<std::string, std::string> settings, std::map<std::string, std::string> worker)
      : settings_(std::move(settings)), worker_(std::move(worker)) {}

  Conversion convert() {
    check_connector();
    const std::string router = find_router();
    YAML::Emitter out;
    out << YAML::Comment(fmt::format(
        "pgoutbox configuration converted from {} by `pgoutbox config from-debezium`",
        name_.empty() ? std::string("a Debezium connector") : fmt::format("Debezium connector \"{}\"", name_)));
    out << YAML::Newline << YAML::BeginMap;
    emit_postgres(out);
    emit_kafka(out);
    emit_tables(out, router);
    out << YAML::EndMap;
    for (const auto& [key, value] : settings_) {
      if (used_.contains(key) || needs_nothing(key)) continue;
      const auto reason = known_reasons().find(key);
      if (reason != known_reasons().end()) {
        leave(key, std::string(reason->second));
      } else if (key.starts_with("snapshot.") || key.starts_with("incremental.snapshot.")) {
        leave(key, "pgoutbox takes no snapshot (on a new slot, tables[].backfill publishes the earlier rows)");
      } else if (key.starts_with("predicates.")) {
        leave(key, "pgoutbox applies no Connect predicates");
      } else if (key.starts_with("errors.")) {
        leave(key, "Connect's error handling; pgoutbox's poison.policy decides what happens to a bad row");
      } else {
        leave(key, "pgoutbox has no equivalent");
      }
    }
    Conversion c;
    c.yaml = std::string(out.c_str()) + "\n";
    c.left_out = std::move(left_out_);
    return c;
  }

  void set_name(std::string name) { name_ = std::move(name); }

 private:
  std::optional<std::string> take(const std::string& key) {
    const auto it = settings_.find(key);
    if (it == settings_.end()) return std::nullopt;
    used_.insert(key);
    if (it->second.find("${") != std::string::npos && !key.ends_with("route.topic.replacement")) {
      leave(key, "holds a Kafka Connect config provider reference, copied as written: resolve it in the output");
    }
    return it->second;
  }

  void leave(const std::string& key, std::string why) { left_out_.push_back(fmt::format("{}: {}", key, why)); }

  void check_connector() {
    const auto cls = take("connector.class");
    if (!cls) throw Unusable("connector.class is missing: this is not a Kafka Connect connector configuration");
    if (*cls != "io.debezium.connector.postgresql.PostgresConnector" && *cls != "PostgresConnector") {
      throw Unusable(fmt::format(
          "connector.class is {}, not io.debezium.connector.postgresql.PostgresConnector: pgoutbox reads PostgreSQL",
          *cls));
    }
    if (const auto name = take("name"); name && name_.empty()) name_ = *name;
    const auto plugin = take("plugin.name");
    if (plugin.value_or("decoderbufs") != "pgoutput") {
      leave("plugin.name",
            fmt::format("is {}: pgoutbox decodes pgoutput only and refuses this slot (exit 11); give postgres.slot a "
                        "new name and publish the earlier rows with tables[].backfill",
                        plugin ? *plugin : std::string("not set (Debezium's default, decoderbufs)")));
    }
  }

  // The name of the first EventRouter in the chain; every other transform is listed as left out.
  std::string find_router() {
    std::string router;
    for (const auto& name : split_list(take("transforms").value_or(""))) {
      const std::string type_key = "transforms." + name + ".type";
      const auto type = take(type_key);
      if (type == kEventRouter && router.empty()) {
        router = name;
        continue;
      }
      if (type == kMessageDecoder && router.empty() && decoder_.empty()) {
        decoder_ = name;
        continue;
      }
      const std::string prefix = "transforms." + name + ".";
      for (const auto& [key, value] : settings_) {
        if (key.starts_with(prefix)) used_.insert(key);
      }
      leave("transforms." + name, fmt::format("{}: pgoutbox applies no transform but the outbox "
                                              "routing, so what it does to the records is lost",
                                              type.value_or("(no type)")));
    }
    if (router.empty()) {
      throw Unusable(fmt::format(
          "no {} transform in transforms: without it Debezium publishes change events, not outbox records, and "
          "pgoutbox publishes outbox records only",
          kEventRouter));
    }
    return router;
  }

  void emit_postgres(YAML::Emitter& out) {
    std::string dsn;
    const auto add = [&](const char* keyword, const std::string& setting) {
      if (const auto value = take(setting)) {
        dsn += fmt::format("{}{}={}", dsn.empty() ? "" : " ", keyword, conninfo_value(*value));
      }
    };
    add("host", "database.hostname");
    add("port", "database.port");
    add("dbname", "database.dbname");
    add("user", "database.user");
    add("sslmode", "database.sslmode");
    add("sslrootcert", "database.sslrootcert");
    add("sslcert", "database.sslcert");
    add("sslkey", "database.sslkey");
    if (dsn.empty()) {
      leave("database.hostname",
            "none of database.hostname, .port, .dbname, .user is set: postgres.dsn is empty "
            "(libpq's defaults and PG* variables apply); set it");
      dsn = "dbname=postgres";
    }
    out << YAML::Key << "postgres" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "dsn" << YAML::Value << YAML::DoubleQuoted << dsn;
    out << YAML::Comment("password: PGOUTBOX_POSTGRES_PASSWORD or postgres.password_file, never in this file");
    out << YAML::Key << "slot" << YAML::Value << take("slot.name").value_or(std::string(kDefaultSlot));
    out << YAML::Key << "publication" << YAML::Value
        << take("publication.name").value_or(std::string(kDefaultPublication));
    // Taking over Debezium's slot: a missing slot must stop pgoutbox, not be created afresh past
    // the events Debezium had not published yet.
    out << YAML::Key << "create_slot" << YAML::Value << false;
    out << YAML::Comment("the slot is Debezium's; set true only for a new slot (with tables[].backfill)");
    out << YAML::Key << "create_publication" << YAML::Value << false;
    out << YAML::EndMap;
  }

  void emit_kafka(YAML::Emitter& out) {
    std::map<std::string, std::string> properties;
    // Debezium's producer is Java's, whose default partitioner hashes the key with murmur2;
    // librdkafka's default (consistent_random) hashes with crc32 and would move keys.
    properties["partitioner"] = "murmur2_random";
    std::string brokers;
    for (const auto& [key, value] : settings_) {
      std::string_view name = key;
      if (name.starts_with("producer.override.")) {
        name.remove_prefix(std::string_view("producer.override.").size());
      } else if (name.starts_with("producer.")) {
        name.remove_prefix(std::string_view("producer.").size());
      } else {
        continue;
      }
      used_.insert(key);
      if (name == "bootstrap.servers") {
        brokers = value;
      } else if (same_in_librdkafka(name)) {
        properties[std::string(name)] = value;
      } else if (name == "sasl.mechanism") {
        properties["sasl.mechanisms"] = value;
      } else if (name == "max.request.size") {
        properties["message.max.bytes"] = value;
      } else if (name == "acks") {
        if (value != "all" && value != "-1") leave(key, "pgoutbox always produces with acks=all");
      } else if (name == "enable.idempotence") {
        if (value != "true") leave(key, "pgoutbox's producer is always idempotent");
      } else if (name == "sasl.jaas.config") {
        static const std::regex user(R"re(username\s*=\s*"([^"]*)")re");
        std::smatch match;
        const bool found = std::regex_search(value, match, user);
        if (found) properties["sasl.username"] = match[1];
        leave(key, fmt::format("the password is not copied: set PGOUTBOX_KAFKA_PROPERTY_SASL_PASSWORD{}",
                               found ? " (the user name is in kafka.properties sasl.username)"
                                     : "; put the user name in kafka.properties sasl.username"));
      } else if (name == "partitioner.class") {
        leave(key, "pgoutbox partitions by the key's murmur2 hash (partitioner murmur2_random), Java's default");
      } else if (name == "delivery.timeout.ms") {
        leave(key, "pgoutbox never gives a record up (message.timeout.ms=0)");
      } else if (name.starts_with("ssl.truststore.") || name.starts_with("ssl.keystore.")) {
        leave(key,
              "librdkafka reads PEM files, not Java key stores: use ssl.ca.location, ssl.certificate.location "
              "and ssl.key.location");
      } else {
        leave(key,
              "no librdkafka equivalent known to the converter; look the property up in librdkafka's configuration "
              "reference");
      }
    }
    out << YAML::Key << "kafka" << YAML::Value << YAML::BeginMap;
    if (brokers.empty()) {
      leave("bootstrap.servers",
            fmt::format("the brokers are the Connect worker's, not in this configuration: the output names {}; set "
                        "kafka.brokers or PGOUTBOX_KAFKA_BROKERS",
                        kBrokersPlaceholder));
      brokers = kBrokersPlaceholder;
    }
    out << YAML::Key << "brokers" << YAML::Value << YAML::DoubleQuoted << brokers;
    out << YAML::Key << "properties" << YAML::Value << YAML::BeginMap;
    for (const auto& [name, value] : properties) out << YAML::Key << name << YAML::Value << YAML::DoubleQuoted << value;
    out << YAML::EndMap << YAML::EndMap;
  }

  // The converters decide the bytes Debezium writes: StringConverter's are format string's,
  // JsonConverter's format debezium-json's, with its schemas.enable (true unless set false),
  // when the key's and the value's agree. A connector's own setting wins over the worker's.
  struct Converted {
    std::string converter;
    bool schemas = true;
    bool from_worker = false;
  };
  std::optional<Converted> converter_of(const std::string& side) {
    const std::string key = side + ".converter";
    for (const auto& [k, v] : settings_) {
      if (k.starts_with(key + ".")) used_.insert(k);
    }
    Converted c;
    if (auto own = take(key)) {
      c.converter = *own;
      const auto schemas = take(key + ".schemas.enable");
      c.schemas = schemas.value_or("true") != "false";
      return c;
    }
    const auto it = worker_.find(key);
    if (it == worker_.end()) return std::nullopt;
    c.converter = it->second;
    const auto schemas = worker_.find(key + ".schemas.enable");
    c.schemas = schemas == worker_.end() || schemas->second != "false";
    c.from_worker = true;
    return c;
  }

  // The table's format, or nullopt with the reason left out when pgoutbox cannot write the
  // same bytes (string is then emitted, and the reason says what consumers would see).
  config::FormatConfig decide_format() {
    const auto key = converter_of("key");
    const auto value = converter_of("value");
    config::FormatConfig format;
    if (!key || !value) {
      const std::string missing = !key ? "key.converter" : "value.converter";
      leave(missing,
            "neither this configuration nor the worker's (--worker) sets it, so the worker's applies: "
            "pgoutbox writes format string (StringConverter's bytes); if the worker's is JsonConverter, pass "
            "its file with --worker");
      const auto& present = key ? key : value;
      if (present && present->converter != kStringConverter) {
        leave(std::string(key ? "key" : "value") + ".converter",
              fmt::format("is {}, but {} is not known: format string is emitted (StringConverter's bytes), so "
                          "consumers see other bytes until both are given",
                          present->converter, missing));
      }
      return format;
    }
    const auto supported = [](const Converted& c) {
      return c.converter == kStringConverter || c.converter == kJsonConverter;
    };
    for (const auto* c : {&*key, &*value}) {
      if (supported(*c)) continue;
      const std::string side = c == &*key ? "key" : "value";
      leave(side + ".converter",
            fmt::format("is {}: pgoutbox writes StringConverter's or JsonConverter's bytes only (a schema-registry "
                        "converter needs a registry: docs/migrating.md \"Converters with a schema registry\"), so "
                        "consumers see other bytes{}",
                        c->converter, side == "key" ? " and keys move partition" : ""));
    }
    if (!supported(*key) || !supported(*value)) return format;
    if (key->converter != value->converter || (key->converter == kJsonConverter && key->schemas != value->schemas)) {
      leave("value.converter",
            fmt::format("the key is written by {}{} and the value by {}{}: pgoutbox's format covers both alike, so "
                        "format string is emitted and consumers see other bytes",
                        key->converter, key->converter == kJsonConverter && !key->schemas ? " without schemas" : "",
                        value->converter,
                        value->converter == kJsonConverter && !value->schemas ? " without schemas" : ""));
      return format;
    }
    if (key->converter == kJsonConverter) {
      format.type = config::Format::debezium_json;
      format.schemas = key->schemas;
    }
    return format;
  }

  void emit_tables(YAML::Emitter& out, const std::string& router) {
    const auto option = [&](const char* name) { return take("transforms." + router + "." + name); };
    const std::string route_by = option("route.by.field").value_or("aggregatetype");
    std::string topic = option("route.topic.replacement").value_or(std::string(kDefaultReplacement));
    const auto regex = option("route.topic.regex");
    if (regex && *regex != kDefaultRouteRegex && *regex != "(.*)") {
      leave("transforms." + router + ".route.topic.regex",
            fmt::format("is {}: pgoutbox's topic is a template of whole column values, so the topics differ: edit "
                        "tables[].topic",
                        *regex));
    }
    for (const std::string_view group : {"${routedByValue}", "$1"}) {
      for (std::size_t at = topic.find(group); at != std::string::npos; at = topic.find(group, at)) {
        topic.replace(at, group.size(), "${" + route_by + "}");
        at += route_by.size() + 3;
      }
    }
    try {
      (void)config::parse_topic_template(topic);
    } catch (const std::invalid_argument& e) {
      throw Unusable(fmt::format("transforms.{}.route.topic.replacement gives the topic template {}, which {}", router,
                                 topic, e.what()));
    }
    // A template that can expand to pgoutbox's own topics (e.g. ${aggregatetype} alone) must
    // exclude them, or the configuration does not load (docs/spec.md I11).
    std::optional<std::string> topic_pattern;
    if (const config::Config defaults; !config::reserved_topic_problem(defaults, topic, "").empty()) {
      topic_pattern = config::reserved_topic_exclusion(defaults);
      leave("transforms." + router + ".route.topic.replacement",
            fmt::format("gives the topic template {}, which could route a row into pgoutbox's checkpoint or "
                        "dead-letter topic: tables[].topic_pattern excludes those two (such a row is poison)",
                        topic));
    }
    std::optional<std::string> type_column;  // Debezium sends no type header unless placed as one
    for (const auto& entry : split_list(option("table.fields.additional.placement").value_or(""))) {
      const auto parts = [&] {
        std::vector<std::string> p;
        std::size_t start = 0;
        for (std::size_t colon = entry.find(':'); colon != std::string::npos; colon = entry.find(':', start)) {
          p.push_back(entry.substr(start, colon - start));
          start = colon + 1;
        }
        p.push_back(entry.substr(start));
        return p;
      }();
      const std::string key = "transforms." + router + ".table.fields.additional.placement";
      if (parts.size() < 2) {
        leave(key, fmt::format("entry {} is not column:placement[:alias]", entry));
        continue;
      }
      const std::string header = parts.size() > 2 ? parts[2] : parts[0];
      if (parts[1] == "header" && header == "type" && !type_column) {
        type_column = parts[0];
      } else if (parts[1] == "header") {
        leave(key, fmt::format("entry {}: pgoutbox names the headers it writes from columns itself (id, type), so "
                               "header {} is not written; a json/jsonb column named by tables[].columns.headers "
                               "can carry it",
                               entry, header));
      } else if (parts[1] == "envelope") {
        leave(key, fmt::format("entry {}: pgoutbox sends the payload as stored and wraps it in no envelope", entry));
      } else if (parts[1] == "partition") {
        leave(key,
              fmt::format("entry {}: pgoutbox chooses the partition from the key (murmur2), as Kafka does", entry));
      } else {
        leave(key, fmt::format("entry {}: unknown placement {}", entry, parts[1]));
      }
    }
    const bool expand = option("table.expand.json.payload").value_or("false") == "true";
    const bool tombstone = option("route.tombstone.on.empty.payload").value_or("false") == "true";
    auto format = decide_format();
    const bool json = format.type == config::Format::debezium_json;
    if (expand && json) {
      format.expand_json_payload = true;
    } else if (expand) {
      leave("transforms." + router + ".table.expand.json.payload",
            "carried over as validate_json: true (a payload that is not JSON is poison): with StringConverter "
            "Debezium writes the expanded struct's toString(), which no consumer parses; pgoutbox sends the JSON as "
            "stored");
    }
    if (json) {
      const auto binary = take("binary.handling.mode");
      if (binary && *binary != "bytes") {
        leave("binary.handling.mode",
              fmt::format("is {}: format debezium-json writes a bytea payload as Connect bytes (Base64), as the "
                          "default bytes does",
                          *binary));
      }
      if (const auto adjust = take("field.name.adjustment.mode"); adjust && *adjust != "none" && expand) {
        leave("field.name.adjustment.mode",
              fmt::format("is {}: format debezium-json keeps an expanded payload's field names as they are", *adjust));
      }
    }

    std::vector<std::string> tables;
    const auto include = take("table.include.list");
    const auto legacy = take("table.whitelist");
    for (const auto& pattern : split_list(include ? *include : legacy.value_or(""))) {
      if (const auto table = literal_table(pattern)) {
        tables.push_back(*table);
      } else {
        leave(include ? "table.include.list" : "table.whitelist",
              fmt::format("entry {} is a pattern, not one schema.table: list the outbox tables in tables[]", pattern));
      }
    }
    const auto prefixes = message_prefixes(tombstone, format);
    if (tables.empty() && prefixes.empty()) {
      leave("table.include.list", "names no single outbox table: the output relays public.outbox; correct tables[]");
      tables.emplace_back("public.outbox");
    }

    // What a table and a message outbox share: the format, and the router's field names in the
    // roles of the columns or of the envelope's fields.
    const auto emit_format = [&] {
      if (!json) return;
      out << YAML::Key << "format" << YAML::Value << YAML::BeginMap;
      out << YAML::Key << "type" << YAML::Value << "debezium-json";
      out << YAML::Key << "schemas" << YAML::Value << format.schemas;
      out << YAML::Key << "expand_json_payload" << YAML::Value << format.expand_json_payload;
      out << YAML::EndMap;
    };
    const auto emit_roles = [&](const char* roles) {
      out << YAML::Key << roles << YAML::Value << YAML::BeginMap;
      out << YAML::Key << "id" << YAML::Value << option("table.field.event.id").value_or("id");
      out << YAML::Key << "aggregate_type" << YAML::Value << route_by;
      out << YAML::Key << "aggregate_id" << YAML::Value << option("table.field.event.key").value_or("aggregateid");
      out << YAML::Key << "payload" << YAML::Value << option("table.field.event.payload").value_or("payload");
      out << YAML::Key << "type" << YAML::Value;
      if (type_column) {
        out << *type_column;
      } else {
        out << YAML::Null << YAML::Comment("Debezium sent no type header");
      }
    };
    out << YAML::Key << "tables" << YAML::Value << YAML::BeginSeq;
    for (const auto& table : tables) {
      out << YAML::BeginMap;
      out << YAML::Key << "table" << YAML::Value << table;
      out << YAML::Key << "topic" << YAML::Value << YAML::DoubleQuoted << topic;
      if (topic_pattern) out << YAML::Key << "topic_pattern" << YAML::Value << YAML::DoubleQuoted << *topic_pattern;
      out << YAML::Key << "null_payload" << YAML::Value << (tombstone ? "tombstone" : json ? "json-null" : "poison");
      out << YAML::Key << "validate_json" << YAML::Value << (expand && !json);
      emit_format();
      emit_roles("columns");
      if (const auto timestamp = option("table.field.event.timestamp")) {
        out << YAML::Key << "timestamp" << YAML::Value << *timestamp;
      }
      out << YAML::EndMap << YAML::EndMap;
    }
    out << YAML::EndSeq;
    if (prefixes.empty()) return;
    // The same router over the decoded envelope: its fields play the columns' roles.
    out << YAML::Key << "messages" << YAML::Value << YAML::BeginSeq;
    for (const auto& prefix : prefixes) {
      out << YAML::BeginMap;
      out << YAML::Key << "prefix" << YAML::Value << YAML::DoubleQuoted << prefix;
      out << YAML::Key << "topic" << YAML::Value << YAML::DoubleQuoted << topic;
      if (topic_pattern) out << YAML::Key << "topic_pattern" << YAML::Value << YAML::DoubleQuoted << *topic_pattern;
      emit_format();
      emit_roles("fields");
      out << YAML::Key << "headers" << YAML::Value << YAML::Null;
      out << YAML::EndMap << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }

  // The message outboxes: with DecodeLogicalDecodingMessageContent before the router, each
  // prefix message.prefix.include.list names literally, unless Debezium's bytes for them cannot
  // be reproduced (then none, each reason left out).
  std::vector<std::string> message_prefixes(bool tombstone, const config::FormatConfig& format) {
    const auto include = take("message.prefix.include.list");
    if (decoder_.empty()) {
      if (include) {
        leave("message.prefix.include.list",
              fmt::format("Debezium publishes these messages as change events unless {} comes before the router in "
                          "transforms: pgoutbox publishes outbox records only",
                          kMessageDecoder));
      }
      return {};
    }
    const std::string key = "transforms." + decoder_;
    for (const auto& [k, v] : settings_) {
      if (k.starts_with(key + ".")) used_.insert(k);
    }
    if (settings_.contains(key + ".fields.null.include") && settings_.at(key + ".fields.null.include") == "true") {
      leave(key + ".fields.null.include",
            "is true: Debezium then types an envelope's nulls as optional bytes fields, which pgoutbox does not "
            "reproduce; no message outbox is emitted");
      return {};
    }
    if (tombstone) {
      leave(key,
            "with route.tombstone.on.empty.payload, Debezium writes a message with a blank payload as a "
            "tombstone, which a pgoutbox message outbox does not; no message outbox is emitted");
      return {};
    }
    if (format.type != config::Format::debezium_json) {
      leave(key,
            "with StringConverter, Debezium writes a message's object or array payload as the decoded struct's "
            "toString(), which no consumer parses; pgoutbox writes its JSON");
    }
    if (const auto exclude = take("message.prefix.exclude.list")) {
      leave("message.prefix.exclude.list",
            "pgoutbox relays only the prefixes messages[] lists, matched exactly: list them there");
    }
    std::vector<std::string> prefixes;
    for (const auto& pattern : split_list(include.value_or(""))) {
      if (pattern.find_first_of("\\^$*+?()[]{}|") == std::string::npos) {
        prefixes.push_back(pattern);
      } else {
        leave("message.prefix.include.list",
              fmt::format("entry {} is a regular expression: pgoutbox matches a prefix exactly; list each prefix in "
                          "messages[]",
                          pattern));
      }
    }
    if (prefixes.empty()) {
      leave(key,
            "message.prefix.include.list names no literal prefix: Debezium relays every prefix it matches, "
            "pgoutbox only those messages[] lists; no message outbox is emitted");
    }
    return prefixes;
  }

  std::map<std::string, std::string> settings_;
  std::map<std::string, std::string> worker_;  // the Connect worker's properties (--worker)
  std::set<std::string> used_;
  std::vector<std::string> left_out_;
  std::string name_;
  std::string decoder_;  // the DecodeLogicalDecodingMessageContent transform's name, when before the router
};

}  // namespace

std::map<std::string, std::string> parse_properties(std::string_view text) {
  // java.util.Properties' line format, as far as a worker file uses it: '#' and '!' comments,
  // key=value, key:value or key value, a trailing '\\' joining the next line, and \\ escapes.
  std::map<std::string, std::string> out;
  std::string logical;
  std::size_t at = 0;
  const auto trim_left = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\f')) s.remove_prefix(1);
    return s;
  };
  while (at <= text.size()) {
    const auto end = std::min(text.find('\n', at), text.size());
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    line = trim_left(line);
    if (logical.empty() && (line.empty() || line.front() == '#' || line.front() == '!')) {
      if (end == text.size()) break;
      continue;
    }
    std::size_t backslashes = 0;
    while (backslashes < line.size() && line[line.size() - 1 - backslashes] == '\\') ++backslashes;
    if (backslashes % 2 == 1 && end != text.size()) {
      logical += line.substr(0, line.size() - 1);
      continue;
    }
    logical += line;
    std::string key, value;
    bool in_value = false, separated = false;
    for (std::size_t i = 0; i < logical.size(); ++i) {
      char c = logical[i];
      if (c == '\\' && i + 1 < logical.size()) {
        c = logical[++i];
        c = c == 't' ? '\t' : c == 'n' ? '\n' : c == 'r' ? '\r' : c == 'f' ? '\f' : c;
        (in_value ? value : key).push_back(c);
        continue;
      }
      if (!in_value && (c == '=' || c == ':' || c == ' ' || c == '\t')) {
        in_value = true;
        separated = c != ' ' && c != '\t';
        while (i + 1 < logical.size() && (logical[i + 1] == ' ' || logical[i + 1] == '\t' ||
                                          (!separated && (logical[i + 1] == '=' || logical[i + 1] == ':')))) {
          separated = separated || logical[i + 1] == '=' || logical[i + 1] == ':';
          ++i;
        }
        continue;
      }
      (in_value ? value : key).push_back(c);
    }
    if (!key.empty()) out[key] = value;
    logical.clear();
    if (end == text.size()) break;
  }
  return out;
}

Conversion from_debezium(std::string_view json, std::string_view worker_properties) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  const simdjson::padded_string text(json);
  if (const auto error = parser.parse(text).get(root); error != simdjson::SUCCESS) {
    throw Unusable(fmt::format("not valid JSON: {}", simdjson::error_message(error)));
  }
  simdjson::dom::object object;
  if (root.get_object().get(object) != simdjson::SUCCESS) throw Unusable("not a JSON object");
  std::string name;
  simdjson::dom::object config;
  if (object["config"].get_object().get(config) == simdjson::SUCCESS) {
    std::string_view n;
    if (object["name"].get_string().get(n) == simdjson::SUCCESS) name = n;
  } else {
    config = object;
  }
  std::map<std::string, std::string> settings;
  for (const auto field : config) {
    std::string_view value;
    if (field.value.get_string().get(value) == simdjson::SUCCESS) {
      settings[std::string(field.key)] = std::string(value);
    } else if (field.value.is_number() || field.value.is_bool()) {
      settings[std::string(field.key)] = simdjson::minify(field.value);  // Connect reads 5432 as "5432"
    } else {
      throw Unusable(fmt::format("setting {} is not a string, number or boolean", field.key));
    }
  }
  Converter converter(std::move(settings), parse_properties(worker_properties));
  converter.set_name(std::move(name));
  return converter.convert();
}

}  // namespace pgoutbox::debezium
