#include "pgoutbox/outbox/mapping.h"

#include <simdjson.h>

#include "pgoutbox/config/topic_template.h"
#include "pgoutbox/outbox/cloudevents.h"
#include "pgoutbox/outbox/debezium_json.h"
#include "pgoutbox/outbox/header_guard.h"
#include "row_text.h"

#include <fmt/format.h>

namespace pgoutbox::outbox {
namespace {

// Built-in type OIDs (pg_type.dat). The payload's value is "the bytes as stored": text for the
// text-like types (jsonb as its normalised text), raw bytes for bytea.
constexpr pgoutput::Oid kBytea = 17;
constexpr pgoutput::Oid kInt8 = 20;
constexpr pgoutput::Oid kInt2 = 21;
constexpr pgoutput::Oid kInt4 = 23;
constexpr pgoutput::Oid kText = 25;
constexpr pgoutput::Oid kJson = 114;
constexpr pgoutput::Oid kBpchar = 1042;
constexpr pgoutput::Oid kVarchar = 1043;
constexpr pgoutput::Oid kTimestamp = 1114;
constexpr pgoutput::Oid kTimestamptz = 1184;
constexpr pgoutput::Oid kJsonb = 3802;
constexpr pgoutput::Oid kUuid = 2950;

std::string table_label(const config::TableConfig& t) { return t.schema + "." + t.name; }

int require_column(const config::TableConfig& table, const pgoutput::Relation& rel, const std::string& role,
                   const std::string& column) {
  const int index = rel.column_index(column);
  if (index < 0) {
    throw MappingError(
        fmt::format("outbox table {}: column \"{}\" (the {}) does not exist or is not published; "
                    "the table has: {}",
                    table_label(table), column, role, [&] {
                      std::string names;
                      for (const auto& c : rel.columns) names += (names.empty() ? "" : ", ") + c.name;
                      return names;
                    }()));
  }
  return index;
}

void require_type(const config::TableConfig& table, const pgoutput::Relation& rel, int index, const std::string& role,
                  std::initializer_list<pgoutput::Oid> allowed, const char* allowed_names) {
  const auto oid = rel.columns[static_cast<std::size_t>(index)].type_oid;
  for (const auto ok : allowed) {
    if (oid == ok) return;
  }
  throw MappingError(fmt::format("outbox table {}: column \"{}\" (the {}) has type oid {}; it must be {}",
                                 table_label(table), rel.columns[static_cast<std::size_t>(index)].name, role, oid,
                                 allowed_names));
}

const pgoutput::ColumnValue* column_at(const pgoutput::TupleData& tuple, int index) {
  if (index < 0 || static_cast<std::size_t>(index) >= tuple.columns.size()) return nullptr;
  return &tuple.columns[static_cast<std::size_t>(index)];
}

// Text of a column, or nullopt for NULL / unchanged TOAST (never sent for INSERT).
std::optional<std::string_view> text_of(const pgoutput::TupleData& tuple, int index) {
  const auto* col = column_at(tuple, index);
  if (col == nullptr || col->kind == pgoutput::ColumnKind::null || col->kind == pgoutput::ColumnKind::unchanged_toast) {
    return std::nullopt;
  }
  return col->bytes;
}

std::optional<int> hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return std::nullopt;
}

bool parse_digits(std::string_view text, std::size_t at, std::size_t count, int& out) {
  if (at + count > text.size()) return false;
  out = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const char c = text[at + i];
    if (c < '0' || c > '9') return false;
    out = out * 10 + (c - '0');
  }
  return true;
}

}  // namespace

std::string shown(std::string_view value) {
  constexpr std::size_t kShownBytes = 64;
  std::string out;
  for (std::size_t i = 0; i < value.size() && i < kShownBytes; ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (value.size() > kShownBytes) out += fmt::format("... ({} bytes)", value.size());
  return out;
}

std::size_t Record::weight() const { return value.size() + (key ? key->size() : 0); }

std::optional<std::string> decode_bytea_hex(std::string_view text) {
  if (text.size() < 2 || text[0] != '\\' || text[1] != 'x' || text.size() % 2 != 0) return std::nullopt;
  std::string out;
  out.resize((text.size() - 2) / 2);
  for (std::size_t i = 2, o = 0; i < text.size(); i += 2, ++o) {
    const auto hi = hex_digit(text[i]);
    const auto lo = hex_digit(text[i + 1]);
    if (!hi || !lo) return std::nullopt;
    out[o] = static_cast<char>((*hi << 4) | *lo);
  }
  return out;
}

std::optional<std::int64_t> parse_pg_timestamp_ms(std::string_view text) {
  // YYYY-MM-DD HH:MM:SS[.f{1,6}][(+|-)HH[:MM[:SS]]]
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (!parse_digits(text, 0, 4, y) || text.size() < 19 || text[4] != '-' || !parse_digits(text, 5, 2, mo) ||
      text[7] != '-' || !parse_digits(text, 8, 2, d) || text[10] != ' ' || !parse_digits(text, 11, 2, h) ||
      text[13] != ':' || !parse_digits(text, 14, 2, mi) || text[16] != ':' || !parse_digits(text, 17, 2, s)) {
    return std::nullopt;
  }
  std::size_t at = 19;
  std::int64_t micros = 0;
  if (at < text.size() && text[at] == '.') {
    ++at;
    int digits = 0;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
      if (digits < 6) micros = micros * 10 + (text[at] - '0');
      ++digits;
      ++at;
    }
    if (digits == 0) return std::nullopt;
    for (int i = digits; i < 6; ++i) micros *= 10;
  }
  std::int64_t offset_s = 0;
  if (at < text.size()) {
    const char sign = text[at];
    if (sign != '+' && sign != '-') return std::nullopt;
    int oh = 0, om = 0, os = 0;
    if (!parse_digits(text, at + 1, 2, oh)) return std::nullopt;
    at += 3;
    if (at < text.size()) {
      if (text[at] != ':' || !parse_digits(text, at + 1, 2, om)) return std::nullopt;
      at += 3;
    }
    if (at < text.size()) {
      if (text[at] != ':' || !parse_digits(text, at + 1, 2, os)) return std::nullopt;
      at += 3;
    }
    if (at != text.size()) return std::nullopt;
    offset_s = (sign == '+' ? 1 : -1) * (oh * 3600 + om * 60 + os);
  }
  const std::chrono::year_month_day ymd{std::chrono::year{y}, std::chrono::month{static_cast<unsigned>(mo)},
                                        std::chrono::day{static_cast<unsigned>(d)}};
  if (!ymd.ok() || h > 23 || mi > 59 || s > 60) return std::nullopt;
  const auto days = std::chrono::sys_days{ymd}.time_since_epoch().count();
  const std::int64_t seconds = static_cast<std::int64_t>(days) * 86400 + h * 3600 + mi * 60 + s - offset_s;
  return seconds * 1000 + micros / 1000;
}

std::vector<MappedColumn> mapped_columns(const config::TableConfig& table) {
  const auto& cols = table.columns;
  std::vector<MappedColumn> out = {{"event id", cols.id}, {"key", cols.aggregate_id}, {"payload", cols.payload}};
  if (cols.type) out.push_back({"event type", *cols.type});
  if (cols.headers) out.push_back({"headers", *cols.headers});
  if (cols.timestamp) out.push_back({"timestamp", *cols.timestamp});
  try {
    for (const auto& part : config::parse_topic_template(table.topic)) {
      if (part.is_column) out.push_back({"topic template reference", part.text});
    }
    if (table.format.cloudevents() && !table.format.event_type.empty()) {
      for (const auto& part : config::parse_topic_template(table.format.event_type)) {
        if (part.is_column) out.push_back({"CloudEvents type", part.text});
      }
    }
  } catch (const std::invalid_argument&) {
    // Refused when the configuration was loaded; ResolvedTable names it.
  }
  return out;
}

namespace {

// The Connect schema Debezium's Postgres connector gives a key or payload column (its
// PostgresValueConverter with the defaults: binary.handling.mode bytes); nullopt for a type
// debezium-json does not reproduce.
std::optional<debezium::ColumnSchema> connect_schema(pgoutput::Oid oid, bool optional) {
  switch (oid) {
    case kText:
    case kVarchar:
    case kBpchar:
      return debezium::ColumnSchema{"string", optional, "", 0};
    case kUuid:
      return debezium::ColumnSchema{"string", optional, "io.debezium.data.Uuid", 1};
    case kJson:
    case kJsonb:
      return debezium::ColumnSchema{"string", optional, "io.debezium.data.Json", 1};
    case kInt2:
      return debezium::ColumnSchema{"int16", optional, "", 0};
    case kInt4:
      return debezium::ColumnSchema{"int32", optional, "", 0};
    case kInt8:
      return debezium::ColumnSchema{"int64", optional, "", 0};
    case kBytea:
      return debezium::ColumnSchema{"bytes", optional, "", 0};
    default:
      return std::nullopt;
  }
}

}  // namespace

// A ${column} template (the topic, the CloudEvents type) resolved against the relation: literal
// text and column indexes; `role` names a missing column, `key` a malformed template.
std::vector<ResolvedTable::TopicPart> ResolvedTable::resolve_template(const config::TableConfig& table,
                                                                      const pgoutput::Relation& relation,
                                                                      const std::string& text, const char* role,
                                                                      const char* key) {
  std::vector<config::TopicPart> parts;
  try {
    parts = config::parse_topic_template(text);
  } catch (const std::invalid_argument& e) {
    throw MappingError(fmt::format("outbox table {}: {}{}", table_label(table), key, e.what()));
  }
  std::vector<TopicPart> out;
  out.reserve(parts.size());
  for (const auto& part : parts) {
    out.push_back(part.is_column ? TopicPart{"", require_column(table, relation, role, part.text)}
                                 : TopicPart{part.text, -1});
  }
  return out;
}

// The template's text for this row; nullopt when a column it refers to is NULL or empty.
std::optional<std::string> ResolvedTable::expand_template(const std::vector<TopicPart>& parts,
                                                          const pgoutput::TupleData& tuple) {
  std::string out;
  for (const auto& part : parts) {
    if (part.column < 0) {
      out += part.literal;
      continue;
    }
    const auto value = text_of(tuple, part.column);
    if (!value || value->empty()) return std::nullopt;
    out += *value;
  }
  return out;
}

namespace {

// Java's String.trim(): what the router's "empty payload" test strips.
bool blank_to_java(std::string_view text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) > 0x20) return false;
  }
  return true;
}

}  // namespace

ResolvedTable::ResolvedTable(const config::TableConfig& table, const pgoutput::Relation& relation,
                             bool provenance_headers, const std::vector<std::string>& not_null)
    : table_(&table), label_(table_label(table)), generation_(relation.generation), provenance_(provenance_headers) {
  const auto& cols = table.columns;
  id_ = require_column(table, relation, "event id", cols.id);
  key_ = require_column(table, relation, "key", cols.aggregate_id);
  payload_ = require_column(table, relation, "payload", cols.payload);
  require_type(table, relation, payload_, "payload", {kJson, kJsonb, kText, kVarchar, kBpchar, kBytea},
               "json, jsonb, text, varchar, char or bytea");
  // json and jsonb are valid by construction; text and bytea are checked when asked to.
  validate_json_ = table.validate_json && relation.columns[static_cast<std::size_t>(payload_)].type_oid != kJson &&
                   relation.columns[static_cast<std::size_t>(payload_)].type_oid != kJsonb;
  payload_kind_ =
      relation.columns[static_cast<std::size_t>(payload_)].type_oid == kBytea ? PayloadKind::bytea : PayloadKind::text;
  if (table.format.type == config::Format::debezium_json) {
    const auto schema_of = [&](int index, const char* role) {
      const auto& column = relation.columns[static_cast<std::size_t>(index)];
      const bool optional = std::find(not_null.begin(), not_null.end(), column.name) == not_null.end();
      const auto schema = connect_schema(column.type_oid, optional);
      if (!schema) {
        throw MappingError(fmt::format(
            "outbox table {}: column \"{}\" (the {}) has type oid {}, and format debezium-json reproduces Debezium's "
            "bytes for text, varchar, char, uuid, smallint, integer, bigint, json, jsonb and bytea only",
            table_label(table), column.name, role, column.type_oid));
      }
      return *schema;
    };
    const auto key = schema_of(key_, "key");
    debezium_ =
        DebeziumForm{debezium::schema_json(key), key.type == "int16" || key.type == "int32" || key.type == "int64",
                     debezium::schema_json(schema_of(payload_, "payload"))};
  }
  if (table.format.cloudevents()) {
    CloudEventForm form;
    // The type attribute: the template, else the type column's value (refused at load when
    // neither is set).
    const std::string type_template =
        !table.format.event_type.empty() ? table.format.event_type : "${" + cols.type.value_or("type") + "}";
    form.type = resolve_template(table, relation, type_template, "CloudEvents type", "format.event_type: ");
    const auto oid = relation.columns[static_cast<std::size_t>(payload_)].type_oid;
    const bool json = oid == kJson || oid == kJsonb || table.validate_json ||
                      table.format.type == config::Format::cloudevents_structured;
    form.content_type = oid == kBytea ? "application/octet-stream"
                        : json        ? "application/json"
                                      : "text/plain; charset=utf-8";
    form.json_by_type = oid == kJson || oid == kJsonb;
    cloudevent_ = std::move(form);
  }
  if (cols.type) {
    // The default "type" column is optional; one the user named must exist.
    type_ = table.type_column_explicit ? require_column(table, relation, "event type", *cols.type)
                                       : relation.column_index(*cols.type);
  }
  if (cols.headers) {
    headers_ = require_column(table, relation, "headers", *cols.headers);
    require_type(table, relation, headers_, "headers", {kJson, kJsonb}, "json or jsonb");
  }
  if (cols.timestamp) {
    timestamp_ = require_column(table, relation, "timestamp", *cols.timestamp);
    require_type(table, relation, timestamp_, "timestamp", {kTimestamptz, kTimestamp}, "timestamptz or timestamp");
  }
  // The topic template (validated when the configuration was loaded): literal text and
  // ${column} references, resolved to column indexes once per relation description.
  topic_ = resolve_template(table, relation, table.topic, "topic template reference", "");
  if (!table.topic_pattern.empty()) {
    try {
      topic_pattern_.emplace(table.topic_pattern);
    } catch (const std::regex_error& e) {
      throw MappingError(fmt::format("outbox table {}: topic_pattern: {}", table_label(table), e.what()));
    }
  }
}

std::variant<Record, Poison> ResolvedTable::build(const pgoutput::TupleData& tuple, const TxnContext& txn) const {
  // Everything that can be built is, so a poison row keeps its key, payload and headers for
  // the dead-letter topic; the first problem found names it.
  Record rec;
  rec.table = label_;
  std::optional<std::pair<std::string, std::string>> problem;  // code, reason
  const auto fail = [&problem](std::string code, std::string reason) {
    if (!problem) problem.emplace(std::move(code), std::move(reason));
  };

  if (const auto id = text_of(tuple, id_)) {
    rec.event_id.assign(*id);
  } else {
    fail("NULL_ID", "the event id column \"" + table_->columns.id + "\" is NULL");
  }

  if (auto topic = expand_template(topic_, tuple)) {
    rec.topic = std::move(*topic);
  } else {
    fail("NULL_ROUTING_VALUE", fmt::format("topic template \"{}\" refers to a NULL or empty column", table_->topic));
  }
  if (!rec.topic.empty()) {
    // The routing value is row data: a topic Kafka would refuse, or one outside the table's
    // allow-list, is poison here, without a broker round trip (and it never names a metric).
    auto why = config::topic_name_problem(rec.topic);
    if (why.empty() && topic_pattern_ && !std::regex_match(rec.topic, *topic_pattern_)) {
      why = fmt::format("does not match the table's topic_pattern \"{}\"", table_->topic_pattern);
    }
    if (!why.empty()) {
      fail("INVALID_TOPIC", fmt::format("the topic \"{}\" {}", shown(rec.topic), why));
      rec.topic.clear();
    }
  }

  if (const auto key = text_of(tuple, key_)) rec.key.emplace(*key);

  const auto payload = text_of(tuple, payload_);
  if (!payload) {
    if (table_->null_payload == config::NullPayload::poison) {
      fail("NULL_PAYLOAD", "the payload column \"" + table_->columns.payload + "\" is NULL");
    } else if (table_->null_payload == config::NullPayload::tombstone) {
      rec.tombstone = true;
    }
  } else if (payload_kind_ == PayloadKind::bytea) {
    if (auto raw = decode_bytea_hex(*payload)) {
      rec.value = std::move(*raw);
    } else {
      fail("INVALID_BYTEA", "the bytea payload is not in hex output form");
      rec.value.assign(*payload);
    }
  } else {
    rec.value.assign(*payload);
  }
  if (payload && validate_json_) {
    thread_local simdjson::dom::parser parser;
    const ParserRelease release(parser);
    simdjson::dom::element ignored;
    if (const auto error = parser.parse(rec.value.data(), rec.value.size()).get(ignored); error != simdjson::SUCCESS) {
      fail("INVALID_JSON", fmt::format("the payload is not valid JSON ({})", simdjson::error_message(error)));
    }
  }

  if (debezium_ && !problem) to_debezium_json(rec, text_of(tuple, key_), payload, fail);

  // Room for id, type and CloudEvents binary mode's eight attributes: one allocation per record.
  rec.headers.reserve(cloudevent_ ? 10 : 2);
  if (!rec.event_id.empty() || !problem) rec.headers.push_back({"id", rec.event_id});
  if (const auto type = text_of(tuple, type_)) rec.headers.push_back({"type", std::string(*type)});
  if (const auto headers = text_of(tuple, headers_)) {
    // Each key of the object is a header: string values as they are, others as their JSON text.
    thread_local simdjson::dom::parser parser;
    const ParserRelease release(parser);
    simdjson::dom::object object;
    if (headers->size() > kMaxColumnHeadersTextBytes) {
      // Never parsed: the parser would take about 13 times its size (header_guard.h).
      fail(
          "TOO_MANY_HEADERS",
          fmt::format("the headers column \"{}\" is {} bytes of JSON, above pgoutbox's cap of {} bytes; it is not read",
                      *table_->columns.headers, headers->size(), kMaxColumnHeadersTextBytes));
    } else if (parser.parse(headers->data(), headers->size()).get_object().get(object) != simdjson::SUCCESS) {
      fail("INVALID_HEADERS", "the headers column \"" + *table_->columns.headers + "\" is not a JSON object");
    } else {
      // Reserved names are dropped (header_guard.h); the rest are capped in count and bytes.
      const std::size_t own = rec.headers.size();
      std::size_t bytes = 0;
      for (const auto field : object) {
        if (is_reserved_header(field.key)) {
          count_dropped_header(label_, field.key);
          continue;
        }
        std::string_view text;
        if (field.value.get_string().get(text) == simdjson::SUCCESS) {
          if (has_nul(text)) {
            // Neither sent nor kept for the dead-letter copy (header_guard.h).
            fail("INVALID_HEADERS", fmt::format("the headers column \"{}\" gives header \"{}\" a value with a NUL byte",
                                                *table_->columns.headers, shown(field.key)));
            continue;
          }
          rec.headers.push_back({std::string(field.key), std::string(text)});
        } else {
          rec.headers.push_back({std::string(field.key), simdjson::minify(field.value)});
        }
        bytes += rec.headers.back().name.size() + rec.headers.back().value.size();
        if (rec.headers.size() - own > kMaxColumnHeaders || bytes > kMaxColumnHeaderBytes) {
          fail(
              "TOO_MANY_HEADERS",
              fmt::format("the headers column \"{}\" holds more than {} headers or {} bytes, pgoutbox's cap per record",
                          *table_->columns.headers, kMaxColumnHeaders, kMaxColumnHeaderBytes));
          // Neither the record nor its dead-letter copy carries the excess.
          rec.headers.resize(own);
          break;
        }
      }
    }
  }
  if (provenance_) {
    rec.headers.push_back({"pgoutbox.lsn", txn.commit_lsn.to_string()});
    rec.headers.push_back({"pgoutbox.commit_time_us", std::to_string(txn.commit_time_unix_us)});
    rec.headers.push_back({"pgoutbox.xid", std::to_string(txn.xid)});
  }

  rec.timestamp_ms = txn.commit_time_unix_us / 1000;
  if (const auto ts = text_of(tuple, timestamp_)) {
    // 'infinity' and BC dates have no Kafka timestamp: those keep the commit time.
    if (const auto ms = parse_pg_timestamp_ms(*ts); ms && *ms >= 0) rec.timestamp_ms = *ms;
  }
  if (cloudevent_ && !problem) to_cloudevent(rec, tuple, fail);
  if (problem) return Poison{rec.event_id, std::move(problem->second), std::move(problem->first), std::move(rec)};
  return rec;
}

// The record as a CloudEvent (cloudevents.h): the attributes from the row, the time from the
// record's timestamp (the timestamp column, else the commit time), traceparent from a header of
// that name (a headers column's).
void ResolvedTable::to_cloudevent(Record& rec, const pgoutput::TupleData& tuple,
                                  const std::function<void(std::string, std::string)>& fail) const {
  cloudevents::Attributes a;
  auto type = expand_template(cloudevent_->type, tuple);
  if (!type) {
    fail("NULL_EVENT_TYPE", "the CloudEvents type attribute refers to a NULL or empty column");
    return;
  }
  a.type = std::move(*type);
  if (a.type.empty()) {
    fail("NULL_EVENT_TYPE", "the CloudEvents type attribute comes out empty");
    return;
  }
  a.id = rec.event_id;
  a.source = table_->format.source;
  a.time = cloudevents::rfc3339(rec.timestamp_ms);
  if (table_->format.subject_from_key && rec.key) a.subject = *rec.key;
  a.datacontenttype = cloudevent_->content_type;
  const auto mode = table_->format.type == config::Format::cloudevents_binary ? cloudevents::Mode::binary
                                                                              : cloudevents::Mode::structured;
  if (auto why =
          cloudevents::apply(rec, std::move(a), mode, payload_kind_ == PayloadKind::bytea, cloudevent_->json_by_type)) {
    fail("INVALID_JSON", std::move(*why));
  }
}

// The key and the value as JsonConverter writes what the router makes of the row: the key
// column typed (a NULL key is JSON null, never a null Kafka key), the payload as a string
// (json and jsonb under the name io.debezium.data.Json), bytes as Base64, or expanded.
void ResolvedTable::to_debezium_json(Record& rec, const std::optional<std::string_view>& key,
                                     const std::optional<std::string_view>& payload,
                                     const std::function<void(std::string, std::string)>& fail) const {
  const bool schemas = table_->format.schemas;
  rec.key.emplace(!key                       ? debezium::envelope(schemas, debezium_->key_schema, "null")
                  : debezium_->key_is_number ? debezium::envelope(schemas, debezium_->key_schema, *key)
                                             : debezium::string_envelope(schemas, debezium_->key_schema, *key));
  if (!payload) {
    if (table_->null_payload == config::NullPayload::json_null) {
      rec.value = debezium::envelope(schemas, debezium_->value_schema, "null");
    }
    return;
  }
  // route.tombstone.on.empty.payload: a payload blank to Java's trim() is a tombstone too.
  if (table_->null_payload == config::NullPayload::tombstone && payload_kind_ == PayloadKind::text &&
      blank_to_java(rec.value)) {
    rec.tombstone = true;
    rec.value.clear();
    return;
  }
  if (payload_kind_ == PayloadKind::bytea) {
    rec.value =
        debezium::envelope(schemas, debezium_->value_schema, debezium::json_string(debezium::base64(rec.value)));
    return;
  }
  if (table_->format.expand_json_payload) {
    auto expanded = debezium::expand(rec.value, table_->columns.payload, schemas);
    if (auto* e = std::get_if<debezium::Expanded>(&expanded)) {
      rec.value = std::move(e->value);
      return;
    }
    if (const auto* u = std::get_if<debezium::Unpublishable>(&expanded)) {
      fail("UNEXPANDABLE_PAYLOAD", u->why);
      return;
    }
  }
  rec.value = debezium::string_envelope(schemas, debezium_->value_schema, rec.value);
}

Mapping::Mapping(std::vector<config::TableConfig> tables, bool provenance_headers, AncestryLookup ancestry,
                 NotNullLookup not_null)
    : tables_(std::move(tables)),
      provenance_(provenance_headers),
      ancestry_(std::move(ancestry)),
      not_null_(std::move(not_null)) {}

const config::TableConfig* Mapping::configured(const std::string& schema, const std::string& name) const {
  for (const auto& t : tables_) {
    if (t.schema == schema && t.name == name) return &t;
  }
  return nullptr;
}

const config::TableConfig* Mapping::family_of(const pgoutput::Relation& relation) {
  if (!ancestry_) return nullptr;
  auto it = ancestors_.find(relation.relid);
  if (it == ancestors_.end()) it = ancestors_.emplace(relation.relid, ancestry_(relation.relid)).first;
  if (it->second) {
    for (const auto& [schema, name] : *it->second) {
      if (const auto* t = configured(schema, name)) return t;
    }
    return nullptr;
  }
  // The relation was dropped, detached or taken out of the publication after its rows were
  // written (e.g. a partition detached and dropped while pgoutbox was behind), so the catalog
  // can no longer say whose partition or child it was. Ignoring it could drop outbox events and confirm past them (I9);
  // stopping on every dropped relation would block an all-tables publication on any dropped table. A partition or
  // inheritance child always has every column of its parent with the same type, so a relation that cannot serve a
  // configured table's mapping is provably outside that table's family; one that can may be a member, and pgoutbox
  // stops before confirming its rows.
  for (const auto& t : tables_) {
    try {
      const ResolvedTable probe(t, relation, provenance_);
    } catch (const MappingError&) {
      continue;
    }
    throw MappingError(fmt::format(
        "relation {}.{} (oid {}) no longer exists, or is no longer in the publication, so pgoutbox cannot tell "
        "whether it was a partition or inheritance child of outbox table {} when this row was written (dropped, "
        "detached or taken out of the publication since); it has that table's columns, so its rows may be outbox "
        "events and nothing past them is confirmed. Fix: if they are not outbox events, move the slot past this "
        "transaction (pg_replication_slot_advance) and restart; if they are, re-insert them from {}.{} (or a backup) "
        "into {} and then advance the slot",
        relation.nspname, relation.relname, relation.relid, table_label(t), relation.nspname, relation.relname,
        table_label(t)));
  }
  return nullptr;
}

const ResolvedTable* Mapping::resolve(const pgoutput::Relation& relation) {
  auto& entry = resolved_[relation.relid];
  if (entry.generation == relation.generation && entry.generation != 0) {
    return entry.table ? &*entry.table : nullptr;
  }
  // A new description (first sight, DDL, rename, relcache invalidation): resolve afresh.
  // The generation is recorded only after success: a table that fails to map keeps failing
  // (MappingError every time), it never falls back to "not configured".
  entry.generation = 0;
  entry.table.reset();
  // Ancestry too: ATTACH/DETACH PARTITION and ALTER TABLE … [NO] INHERIT invalidate the
  // relation, and pgoutput sends a new description before its next change.
  ancestors_.erase(relation.relid);
  const auto not_null = [&](const config::TableConfig& t) {
    return t.format.type == config::Format::debezium_json && not_null_ ? not_null_(relation.relid)
                                                                       : std::vector<std::string>{};
  };
  if (const auto* t = configured(relation.nspname, relation.relname)) {
    entry.table.emplace(*t, relation, provenance_, not_null(*t));
  } else if (const auto* family = family_of(relation)) {
    try {
      entry.table.emplace(*family, relation, provenance_, not_null(*family));
    } catch (const MappingError& e) {
      throw MappingError(fmt::format(
          "relation {}.{} is a partition or inheritance child of outbox table {}, and its rows cannot be mapped: {}. "
          "Fix: give {}.{} the columns of {} with the same types (a publication column list must include them), or "
          "detach it from {} and take it out of the publication",
          relation.nspname, relation.relname, table_label(*family), e.what(), relation.nspname, relation.relname,
          table_label(*family), table_label(*family)));
    }
  }
  entry.generation = relation.generation;
  return entry.table ? &*entry.table : nullptr;
}

}  // namespace pgoutbox::outbox
