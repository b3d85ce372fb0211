#include "pgoutbox/outbox/envelope.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <charconv>

#include "pgoutbox/config/topic_template.h"
#include "pgoutbox/outbox/cloudevents.h"
#include "pgoutbox/outbox/debezium_json.h"
#include "pgoutbox/outbox/header_guard.h"
#include "row_text.h"

namespace pgoutbox::outbox {
namespace {

// A field as text: a string's own characters, a number as written in the envelope; nullopt for
// a missing field, null, or a value with no single text (object, array, boolean).
std::optional<std::string> scalar_text(simdjson::dom::object object, std::string_view name) {
  simdjson::dom::element value;
  if (object.at_key(name).get(value) != simdjson::SUCCESS) return std::nullopt;
  switch (value.type()) {
    case simdjson::dom::element_type::STRING:
      return std::string(value.get_string().value_unsafe());
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64:
    case simdjson::dom::element_type::DOUBLE:
      return simdjson::minify(value);
    default:
      return std::nullopt;
  }
}

}  // namespace

MessageMapping::MessageMapping(std::vector<config::MessageConfig> messages, bool provenance_headers)
    : provenance_(provenance_headers) {
  for (auto& m : messages) {
    Entry entry;
    entry.label = label(m.prefix);
    try {
      entry.topic = parse_template(m.topic);
      if (!m.topic_pattern.empty()) entry.topic_pattern.emplace(m.topic_pattern);
      if (!m.format.event_type.empty()) entry.event_type = parse_template(m.format.event_type);
    } catch (const std::exception& e) {
      throw MappingError(fmt::format("message outbox {}: {}", entry.label, e.what()));
    }
    entry.config = std::move(m);
    entries_.push_back(std::move(entry));
  }
}

std::vector<MessageMapping::TopicPart> MessageMapping::parse_template(const std::string& text) {
  std::vector<TopicPart> parts;
  for (auto& part : config::parse_topic_template(text)) {
    if (part.is_column) {
      parts.push_back({"", std::move(part.text)});
    } else {
      parts.push_back({std::move(part.text), std::nullopt});
    }
  }
  return parts;
}

std::optional<std::string> MessageMapping::expand_template(const std::vector<TopicPart>& parts, const FieldText& field,
                                                           std::string* missing) {
  std::string out;
  for (const auto& part : parts) {
    if (!part.field) {
      out += part.literal;
      continue;
    }
    const auto value = field(*part.field);
    if (!value || value->empty()) {
      if (missing != nullptr) *missing = *part.field;
      return std::nullopt;
    }
    out += *value;
  }
  return out;
}

std::size_t max_message_bytes(const std::map<std::string, std::string>& kafka_properties) {
  const auto it = kafka_properties.find("message.max.bytes");
  if (it == kafka_properties.end()) return kDefaultMaxMessageBytes;
  std::size_t value = 0;
  const auto* end = it->second.data() + it->second.size();
  // Not a number: librdkafka refuses it when the producer is created, before any message comes.
  if (const auto [ptr, ec] = std::from_chars(it->second.data(), end, value); ec != std::errc() || ptr != end) {
    return kDefaultMaxMessageBytes;
  }
  return value;
}

std::string MessageMapping::label(std::string_view prefix) { return fmt::format("message:{}", prefix); }

std::optional<std::size_t> MessageMapping::find(std::string_view prefix) const {
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].config.prefix == prefix) return i;
  }
  return std::nullopt;
}

std::variant<Record, Poison> MessageMapping::build(std::size_t index, std::string_view envelope, const TxnContext& txn,
                                                   std::size_t max_bytes) const {
  const auto& entry = entries_.at(index);
  const auto& fields = entry.config.fields;
  // As for a row: everything that can be built is, so that a poison message keeps what the
  // dead-letter topic can carry; the first problem found names it.
  Record rec;
  rec.table = entry.label;
  rec.timestamp_ms = txn.commit_time_unix_us / 1000;
  std::optional<std::pair<std::string, std::string>> problem;  // code, reason
  const auto fail = [&problem](std::string code, std::string reason) {
    if (!problem) problem.emplace(std::move(code), std::move(reason));
  };
  const auto poison = [&]() {
    return Poison{rec.event_id, std::move(problem->second), std::move(problem->first), std::move(rec)};
  };

  if (envelope.size() > max_bytes) {
    // Never parsed (the parser would take about 13 times its size), and not carried to the
    // dead-letter topic either: the record it could make would be refused for its size.
    fail("ENVELOPE_TOO_LARGE",
         fmt::format("the message is {} bytes, above the largest record the producer may send (message.max.bytes, {})",
                     envelope.size(), max_bytes));
    return poison();
  }
  thread_local simdjson::dom::parser parser;
  const ParserRelease release(parser);
  simdjson::dom::object object;
  if (const auto error = parser.parse(envelope.data(), envelope.size()).get_object().get(object);
      error != simdjson::SUCCESS) {
    // The whole message goes to the dead-letter topic as it came.
    rec.value.assign(envelope);
    fail("INVALID_ENVELOPE", fmt::format("the message is not a JSON object ({})", simdjson::error_message(error)));
    return poison();
  }

  if (auto id = scalar_text(object, fields.id); id && has_nul(*id)) {
    // The `id` header would read as another id to a C-string consumer (header_guard.h).
    fail("INVALID_HEADERS",
         fmt::format("the envelope's event id (field \"{}\") holds a NUL byte: \"{}\"", fields.id, shown(*id)));
  } else if (id && !id->empty()) {
    rec.event_id = std::move(*id);
  } else {
    fail("NULL_ID", fmt::format("the envelope has no event id (field \"{}\", a string or a number)", fields.id));
  }

  const FieldText field_text = [&object](std::string_view name) { return scalar_text(object, name); };
  if (std::string missing; auto topic = expand_template(entry.topic, field_text, &missing)) {
    rec.topic = std::move(*topic);
  } else {
    fail("NULL_ROUTING_VALUE", fmt::format("topic template \"{}\" refers to envelope field \"{}\", which is "
                                           "missing, empty, or not a string or number",
                                           entry.config.topic, missing));
  }
  if (!rec.topic.empty()) {
    auto why = config::topic_name_problem(rec.topic);
    if (why.empty() && entry.topic_pattern && !std::regex_match(rec.topic, *entry.topic_pattern)) {
      why = fmt::format("does not match the message outbox's topic_pattern \"{}\"", entry.config.topic_pattern);
    }
    if (!why.empty()) {
      // Quoted as the table mapping quotes a routing value: the envelope's field is the
      // message author's text, and the reason is logged and sent as a dead-letter header.
      fail("INVALID_TOPIC", fmt::format("the topic \"{}\" {}", shown(rec.topic), why));
      rec.topic.clear();
    }
  }

  simdjson::dom::element key;
  if (object.at_key(fields.aggregate_id).get(key) == simdjson::SUCCESS && !key.is_null()) {
    std::string_view text;
    rec.key = key.get_string().get(text) == simdjson::SUCCESS ? std::string(text) : simdjson::minify(key);
  }

  simdjson::dom::element payload;
  bool payload_is_json = false;  // an object, array, number or boolean: the value is its JSON text
  if (object.at_key(fields.payload).get(payload) != simdjson::SUCCESS || payload.is_null()) {
    fail("NULL_PAYLOAD", fmt::format("the envelope has no payload (field \"{}\")", fields.payload));
  } else if (std::string_view text; payload.get_string().get(text) == simdjson::SUCCESS) {
    rec.value.assign(text);
  } else {
    rec.value = simdjson::minify(payload);
    payload_is_json = true;
  }

  if (!rec.event_id.empty() || !problem) rec.headers.push_back({"id", rec.event_id});
  if (fields.type) {
    if (auto type = scalar_text(object, *fields.type); type && has_nul(*type)) {
      fail("INVALID_HEADERS",
           fmt::format("the envelope's type (field \"{}\") holds a NUL byte: \"{}\"", *fields.type, shown(*type)));
    } else if (type) {
      rec.headers.push_back({"type", std::move(*type)});
    }
  }
  simdjson::dom::element headers;
  if (fields.headers && object.at_key(*fields.headers).get(headers) == simdjson::SUCCESS && !headers.is_null()) {
    simdjson::dom::object headers_object;
    if (headers.get_object().get(headers_object) != simdjson::SUCCESS) {
      fail("INVALID_HEADERS",
           fmt::format("the envelope's headers (field \"{}\") are not a JSON object", *fields.headers));
    } else {
      // The same rules as a table's headers column (header_guard.h).
      const std::size_t own = rec.headers.size();
      std::size_t bytes = 0;
      for (const auto field : headers_object) {
        if (is_reserved_header(field.key)) {
          count_dropped_header(entry.label, field.key);
          continue;
        }
        std::string_view text;
        if (field.value.get_string().get(text) == simdjson::SUCCESS) {
          if (has_nul(text)) {
            // Neither sent nor kept for the dead-letter copy (header_guard.h).
            fail("INVALID_HEADERS",
                 fmt::format("the envelope's headers give header \"{}\" a value with a NUL byte", shown(field.key)));
            continue;
          }
          rec.headers.push_back({std::string(field.key), std::string(text)});
        } else {
          rec.headers.push_back({std::string(field.key), simdjson::minify(field.value)});
        }
        bytes += rec.headers.back().name.size() + rec.headers.back().value.size();
        if (rec.headers.size() - own > kMaxColumnHeaders || bytes > kMaxColumnHeaderBytes) {
          fail("TOO_MANY_HEADERS",
               fmt::format("the envelope's headers hold more than {} headers or {} bytes, pgoutbox's cap per record",
                           kMaxColumnHeaders, kMaxColumnHeaderBytes));
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
  if (!problem && entry.config.format.type == config::Format::debezium_json) {
    to_debezium_json(entry, envelope, rec, fail);
  }
  if (!problem && entry.config.format.cloudevents()) to_cloudevent(entry, field_text, payload_is_json, rec, fail);
  if (problem) return poison();
  return rec;
}

// The key and the value as Debezium writes them with DecodeLogicalDecodingMessageContent, the
// outbox event router and JsonConverter: each typed as JsonSchemaData infers it from the envelope.
// What stops Debezium's task there (an envelope it cannot decode, no aggregate id, a routing
// value that is not a string) is poison INVALID_ENVELOPE.
void MessageMapping::to_debezium_json(const Entry& entry, std::string_view envelope, Record& rec, const Fail& fail) {
  const auto& fields = entry.config.fields;
  const bool schemas = entry.config.format.schemas;
  auto decoded = debezium::decode_envelope(envelope);
  if (const auto* u = std::get_if<debezium::Unpublishable>(&decoded)) {
    fail("INVALID_ENVELOPE", u->why);
    return;
  }
  const auto& all = std::get<std::vector<debezium::DecodedField>>(decoded);
  const auto find = [&all](std::string_view name) -> const debezium::DecodedField* {
    for (const auto& f : all) {
      if (f.name == name) return &f;
    }
    return nullptr;
  };
  const auto* routing = find(fields.aggregate_type);
  if (routing == nullptr || !routing->text) {
    fail("INVALID_ENVELOPE",
         fmt::format("the envelope's routing value (field \"{}\") is missing, null or not a string, and Debezium's "
                     "router stops on such a message",
                     fields.aggregate_type));
    return;
  }
  const auto* key = find(fields.aggregate_id);
  if (key == nullptr) {
    fail("INVALID_ENVELOPE", fmt::format("the envelope has no aggregate id (field \"{}\"), and Debezium's router "
                                         "stops on such a message",
                                         fields.aggregate_id));
    return;
  }
  rec.key.emplace(debezium::envelope(schemas, key->schema, key->value));
  // The id header as Kafka Connect's header converter writes a number: Java's text of it.
  if (const auto* id = find(fields.id); id != nullptr && !id->text) {
    for (auto& h : rec.headers) {
      if (h.name == "id") h.value = id->value;
    }
  }
  const auto* payload = find(fields.payload);
  if (payload == nullptr) return;  // null or an empty array: poison NULL_PAYLOAD already
  if (entry.config.format.expand_json_payload && payload->text) {
    auto expanded = debezium::expand(*payload->text, fields.payload, schemas);
    if (auto* e = std::get_if<debezium::Expanded>(&expanded)) {
      rec.value = std::move(e->value);
      return;
    }
    if (const auto* u = std::get_if<debezium::Unpublishable>(&expanded)) {
      fail("UNEXPANDABLE_PAYLOAD", u->why);
      return;
    }
  }
  rec.value = debezium::envelope(schemas, payload->schema, payload->value);
}

// The message as a CloudEvent (cloudevents.h): the type from format.event_type's template or
// the type field, the time the commit's, the payload's content type JSON unless it is a string
// (in structured mode a string must hold JSON, as a text column's payload must).
void MessageMapping::to_cloudevent(const Entry& entry, const FieldText& field, bool payload_is_json, Record& rec,
                                   const Fail& fail) {
  const auto& format = entry.config.format;
  cloudevents::Attributes a;
  std::optional<std::string> type;
  if (!entry.event_type.empty()) {
    type = expand_template(entry.event_type, field);
  } else if (entry.config.fields.type) {
    type = field(*entry.config.fields.type);
  }
  if (!type || type->empty()) {
    fail("NULL_EVENT_TYPE",
         "the CloudEvents type attribute refers to an envelope field that is missing, empty, or "
         "not a string or number");
    return;
  }
  a.type = std::move(*type);
  a.id = rec.event_id;
  a.source = format.source;
  a.time = cloudevents::rfc3339(rec.timestamp_ms);
  if (format.subject_from_key && rec.key) a.subject = *rec.key;
  const bool structured = format.type == config::Format::cloudevents_structured;
  a.datacontenttype = payload_is_json || structured ? "application/json" : "text/plain; charset=utf-8";
  if (auto why =
          cloudevents::apply(rec, std::move(a), structured ? cloudevents::Mode::structured : cloudevents::Mode::binary,
                             false, payload_is_json)) {
    fail("INVALID_JSON", std::move(*why));
  }
}

}  // namespace pgoutbox::outbox
