#include "pgoutbox/outbox/debezium_json.h"

#include <simdjson.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace pgoutbox::outbox::debezium {

std::string schema_json(const ColumnSchema& schema) {
  std::string out = "{\"type\":\"" + schema.type + "\",\"optional\":" + (schema.optional ? "true" : "false");
  if (!schema.name.empty()) {
    out += ",\"name\":";
    append_json_string(out, schema.name);
  }
  if (schema.version != 0) out += ",\"version\":" + std::to_string(schema.version);
  return out + "}";
}

namespace {

// The bytes append_json_string does not write as they are: controls, '"', '\' and the first
// byte of a character beyond the BMP.
constexpr std::array<bool, 256> kSpecial = [] {
  std::array<bool, 256> special{};
  for (unsigned b = 0; b < 256; ++b) special[b] = b < 0x20 || b == '"' || b == '\\' || b >= 0xF0;
  return special;
}();

}  // namespace

void append_json_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const auto escape = [&](unsigned unit) {
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out.push_back(kHex[(unit >> shift) & 0xF]);
  };
  out.reserve(out.size() + text.size() + 2);
  out.push_back('"');
  for (std::size_t i = 0; i < text.size(); ++i) {
    // The run of characters written as they are, appended at once.
    std::size_t run = i;
    while (run < text.size() && !kSpecial[static_cast<unsigned char>(text[run])]) ++run;
    if (run > i) {
      out.append(text, i, run - i);
      i = run;
      if (i == text.size()) break;
    }
    const char c = text[i];
    const auto u = static_cast<unsigned char>(c);
    // A character beyond the BMP (four UTF-8 bytes) is a surrogate pair to Java, and Jackson
    // writes each half escaped unless COMBINE_UNICODE_SURROGATES_IN_UTF8 (off by default).
    if (u >= 0xF0 && u <= 0xF4 && i + 3 < text.size()) {
      const unsigned code = ((u & 0x07U) << 18) | ((static_cast<unsigned char>(text[i + 1]) & 0x3FU) << 12) |
                            ((static_cast<unsigned char>(text[i + 2]) & 0x3FU) << 6) |
                            (static_cast<unsigned char>(text[i + 3]) & 0x3FU);
      escape(0xD800 + ((code - 0x10000) >> 10));
      escape(0xDC00 + ((code - 0x10000) & 0x3FF));
      i += 3;
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (u < 0x20) {
          escape(u);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

std::string json_string(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  append_json_string(out, text);
  return out;
}

std::string base64(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t n = (static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16) |
                            (static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8) |
                            static_cast<unsigned char>(bytes[i + 2]);
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(kAlphabet[(n >> 6) & 63]);
    out.push_back(kAlphabet[n & 63]);
  }
  if (const auto rest = bytes.size() - i; rest > 0) {
    std::uint32_t n = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (rest == 2) n |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(rest == 2 ? kAlphabet[(n >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

std::string java_double(double value) {
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  // The shortest digits, as d.ddde±x; Double.toString places the point itself.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<std::size_t>(res.ptr - buf));
  const auto e = sci.find('e');
  std::string digits;
  bool negative = false;
  for (const char c : sci.substr(0, e)) {
    if (c == '-') negative = true;
    if (c >= '0' && c <= '9') digits.push_back(c);
  }
  int exponent = 0;
  std::from_chars(sci.data() + e + (sci[e + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exponent);
  std::string out = negative ? "-" : "";
  const double magnitude = std::fabs(value);
  if (magnitude >= 1e-3 && magnitude < 1e7) {
    if (exponent >= 0) {
      const auto whole = static_cast<std::size_t>(exponent) + 1;
      if (digits.size() <= whole) {
        out += digits + std::string(whole - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, whole) + "." + digits.substr(whole);
      }
    } else {
      out += "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1) + "." + (digits.size() > 1 ? digits.substr(1) : "0") + "E" + std::to_string(exponent);
  return out;
}

std::string envelope(bool schemas, std::string_view schema, std::string_view payload) {
  if (!schemas) return std::string(payload);
  std::string out;
  out.reserve(schema.size() + payload.size() + 24);
  out += "{\"schema\":";
  out += schema;
  out += ",\"payload\":";
  out += payload;
  out += "}";
  return out;
}

std::string string_envelope(bool schemas, std::string_view schema, std::string_view text) {
  std::string out;
  out.reserve(schema.size() + text.size() + text.size() / 8 + 32);
  if (schemas) {
    out += "{\"schema\":";
    out += schema;
    out += ",\"payload\":";
  }
  append_json_string(out, text);
  if (schemas) out += "}";
  return out;
}

namespace {

// A Connect schema JsonSchemaData infers (every one optional).
struct Inferred {
  enum class Kind { string, boolean, int32, int64, float64, array, structure } kind = Kind::string;
  std::optional<std::string> name;                       // a struct's
  std::vector<std::pair<std::string, Inferred>> fields;  // a struct's, in order
  std::vector<Inferred> items;                           // an array's element schema (one)
  // Every inferred schema is optional but a struct merged from an array's differing objects:
  // Connect's SchemaUtil.copySchemaBasics, which the merge builds it with, does not copy it.
  bool optional = true;

  bool operator==(const Inferred&) const = default;
};

// Why the router gave up on a document: its expansion keeps the string.
struct Refused {
  std::string why;
};

const char* kind_name(Inferred::Kind kind) {
  switch (kind) {
    case Inferred::Kind::string:
      return "string";
    case Inferred::Kind::boolean:
      return "boolean";
    case Inferred::Kind::int32:
      return "int32";
    case Inferred::Kind::int64:
      return "int64";
    case Inferred::Kind::float64:
      return "double";
    case Inferred::Kind::array:
      return "array";
    case Inferred::Kind::structure:
      return "struct";
  }
  return "string";
}

// Called on an element of that type only.
simdjson::dom::array array_of(simdjson::dom::element e) {
  simdjson::dom::array out;
  if (e.get_array().get(out) != simdjson::SUCCESS) return {};
  return out;
}
simdjson::dom::object object_of(simdjson::dom::element e) {
  simdjson::dom::object out;
  if (e.get_object().get(out) != simdjson::SUCCESS) return {};
  return out;
}

// The fields of an object as Jackson's tree holds them: a repeated name keeps its first place
// and its last value.
std::vector<std::pair<std::string_view, simdjson::dom::element>> fields_of(simdjson::dom::object object) {
  std::vector<std::pair<std::string_view, simdjson::dom::element>> out;
  for (const auto field : object) {
    bool replaced = false;
    for (auto& [name, value] : out) {
      if (name == field.key) {
        value = field.value;
        replaced = true;
        break;
      }
    }
    if (!replaced) out.emplace_back(field.key, field.value);
  }
  return out;
}

// Jackson's node type of a number: an integer within int32, within int64, beyond (BigInteger,
// which the router types double and then cannot store), or a double.
Inferred::Kind number_kind(simdjson::dom::element e) {
  if (e.is_int64()) {
    const auto v = e.get_int64().value_unsafe();
    return v >= std::numeric_limits<std::int32_t>::min() && v <= std::numeric_limits<std::int32_t>::max()
               ? Inferred::Kind::int32
               : Inferred::Kind::int64;
  }
  return Inferred::Kind::float64;  // uint64 beyond int64 (a BigInteger to Jackson) or a double
}

bool is_number(simdjson::dom::element e) { return e.is_int64() || e.is_uint64() || e.is_double(); }

using Schema = std::optional<Inferred>;  // nullopt: no schema (a null or an empty array), the field is left out

Schema infer(const std::optional<std::string>& key, simdjson::dom::element node);

// The schema of an array's elements (toConnectSchemaWithCycles): of its first non-null one,
// every other of the same JSON type (and, for numbers, the same schema); objects merge their
// fields in the order first met (Debezium merges them in a HashSet's order, which changes from
// one JVM to the next: no order can match it always).
Inferred infer_elements(const std::optional<std::string>& key, simdjson::dom::array array) {
  std::optional<simdjson::dom::element> sample;
  Schema sample_number;
  for (const auto element : array) {
    if (element.is_null()) continue;
    if (!sample) sample = element;
    if (element.type() != sample->type() && !(is_number(element) && is_number(*sample))) {
      throw Refused{"an array is not homogenous (Field is not a homogenous array)"};
    }
    if (is_number(*sample)) {
      if (!sample_number) sample_number = infer(std::nullopt, *sample);
      if (infer(std::nullopt, element) != sample_number) {
        throw Refused{"an array mixes number types (Field is not a homogenous array)"};
      }
    }
  }
  if (sample && sample->is_object()) {
    // The objects' distinct schemas: one is the element schema as it is; more are merged.
    std::vector<Inferred> distinct;
    for (const auto element : array) {
      if (!element.is_object()) continue;
      auto schema = infer(key, element);
      bool seen = false;
      for (const auto& d : distinct) seen = seen || d == *schema;
      if (!seen) distinct.push_back(std::move(*schema));
    }
    Inferred merged = distinct.front();
    for (std::size_t i = 1; i < distinct.size(); ++i) {
      for (const auto& field : distinct[i].fields) {
        bool known = false;
        for (const auto& old : merged.fields) known = known || old.first == field.first;
        if (!known) merged.fields.push_back(field);
      }
    }
    merged.optional = distinct.size() == 1;
    return merged;
  }
  Schema schema = sample ? infer(std::nullopt, *sample) : std::nullopt;
  if (!schema) throw Refused{"an array has no member schema (Array has unrecognized member schema)"};
  return *schema;
}

Schema infer(const std::optional<std::string>& key, simdjson::dom::element node) {
  switch (node.type()) {
    case simdjson::dom::element_type::STRING:
      return Inferred{Inferred::Kind::string, {}, {}, {}};
    case simdjson::dom::element_type::BOOL:
      return Inferred{Inferred::Kind::boolean, {}, {}, {}};
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64:
    case simdjson::dom::element_type::DOUBLE:
      return Inferred{number_kind(node), {}, {}, {}};
    case simdjson::dom::element_type::ARRAY: {
      const auto array = array_of(node);
      if (array.size() == 0) return std::nullopt;
      return Inferred{Inferred::Kind::array, {}, {}, {infer_elements(key, array)}};
    }
    case simdjson::dom::element_type::OBJECT: {
      Inferred out{Inferred::Kind::structure, key, {}, {}};
      const auto object = object_of(node);
      for (const auto& [name, value] : fields_of(object)) {
        // Only a struct is named by its path (an array's objects too); a scalar's schema is not.
        std::optional<std::string> path;
        if (value.is_object() || value.is_array()) {
          path = (key && !key->empty() ? *key + "." : std::string()) + std::string(name);
        }
        auto schema = infer(path, value);
        if (schema) out.fields.emplace_back(std::string(name), std::move(*schema));
      }
      return out;
    }
    case simdjson::dom::element_type::NULL_VALUE:
      return std::nullopt;
  }
  return std::nullopt;
}

void write_schema(std::string& out, const Inferred& schema, const std::string* field) {
  out += "{\"type\":\"";
  out += kind_name(schema.kind);
  out += "\"";
  if (schema.kind == Inferred::Kind::structure) {
    out += ",\"fields\":[";
    bool first = true;
    for (const auto& [name, sub] : schema.fields) {
      if (!first) out += ",";
      first = false;
      write_schema(out, sub, &name);
    }
    out += "]";
  } else if (schema.kind == Inferred::Kind::array) {
    out += ",\"items\":";
    write_schema(out, schema.items.front(), nullptr);
  }
  out += schema.optional ? ",\"optional\":true" : ",\"optional\":false";
  if (schema.name) {
    out += ",\"name\":";
    append_json_string(out, *schema.name);
  }
  if (field != nullptr) {
    out += ",\"field\":";
    append_json_string(out, *field);
  }
  out += "}";
}

// A value the router cannot store under its inferred schema (Struct.put's validation): the
// task stops.
struct Unstorable {
  std::string why;
};

// The value as the router converts it (getStructFieldValue) and JsonConverter writes it. Every
// inferred schema is optional, so null is always stored.
void write_value(std::string& out, simdjson::dom::element node, const Inferred& schema) {
  const auto mismatch = [&](const char* what) {
    throw Unstorable{fmt::format("a {} under an inferred {} schema", what, kind_name(schema.kind))};
  };
  switch (node.type()) {
    case simdjson::dom::element_type::NULL_VALUE:
      out += "null";
      return;
    case simdjson::dom::element_type::STRING:
      if (schema.kind != Inferred::Kind::string) mismatch("string");
      append_json_string(out, node.get_string().value_unsafe());
      return;
    case simdjson::dom::element_type::BOOL:
      if (schema.kind != Inferred::Kind::boolean) mismatch("boolean");
      out += node.get_bool().value_unsafe() ? "true" : "false";
      return;
    case simdjson::dom::element_type::UINT64:
      throw Unstorable{fmt::format("the integer {} is beyond a Java long (a BigDecimal no inferred schema stores)",
                                   node.get_uint64().value_unsafe())};
    case simdjson::dom::element_type::INT64: {
      if (number_kind(node) != schema.kind) mismatch(number_kind(node) == Inferred::Kind::int32 ? "int" : "long");
      out += std::to_string(node.get_int64().value_unsafe());
      return;
    }
    case simdjson::dom::element_type::DOUBLE: {
      if (schema.kind != Inferred::Kind::float64) mismatch("double");
      const double d = node.get_double().value_unsafe();
      if (!std::isfinite(d)) throw Unstorable{"a number beyond a double's range"};
      out += java_double(d);
      return;
    }
    case simdjson::dom::element_type::ARRAY: {
      if (schema.kind != Inferred::Kind::array) mismatch("array");
      out += "[";
      bool first = true;
      const auto array = array_of(node);
      for (const auto element : array) {
        if (!first) out += ",";
        first = false;
        write_value(out, element, schema.items.front());
      }
      out += "]";
      return;
    }
    case simdjson::dom::element_type::OBJECT: {
      if (schema.kind != Inferred::Kind::structure) mismatch("object");
      const auto object = object_of(node);
      out += "{";
      bool first = true;
      for (const auto& [name, sub] : schema.fields) {
        if (!first) out += ",";
        first = false;
        append_json_string(out, name);
        out += ":";
        // The last value of the name (a repeated name keeps its last value), null when absent.
        std::optional<simdjson::dom::element> value;
        for (const auto field : object) {
          if (field.key == name) value = field.value;
        }
        if (!value) {
          out += "null";
        } else {
          write_value(out, *value, sub);
        }
      }
      out += "}";
      return;
    }
  }
}

// An inferred schema and its JSON, as JsonConverter writes it.
struct InferredSchema {
  Inferred schema;
  std::string json;
};

// The shape of a document: everything the inference reads from it (each field's name in order,
// each value's JSON type and number kind), so that documents of one shape infer one schema.
// False for a document holding an array: an array's inference also decides whether the router
// keeps the string, so it is not cached.
bool append_shape(std::string& out, simdjson::dom::element node) {
  switch (node.type()) {
    case simdjson::dom::element_type::STRING:
      out += 's';
      return true;
    case simdjson::dom::element_type::BOOL:
      out += 'b';
      return true;
    case simdjson::dom::element_type::INT64:
      out += number_kind(node) == Inferred::Kind::int32 ? 'i' : 'l';
      return true;
    case simdjson::dom::element_type::UINT64:
    case simdjson::dom::element_type::DOUBLE:
      out += 'd';
      return true;
    case simdjson::dom::element_type::NULL_VALUE:
      out += 'n';
      return true;
    case simdjson::dom::element_type::ARRAY:
      return false;
    case simdjson::dom::element_type::OBJECT:
      out += '{';
      for (const auto field : object_of(node)) {
        out += std::to_string(field.key.size());  // the name's length first: any byte may follow
        out += ':';
        out += field.key;
        if (!append_shape(out, field.value)) return false;
      }
      out += '}';
      return true;
  }
  return false;
}

// The schema of an object `root` payload of `size` bytes in column `field`: inferred once per
// shape (payloads of one event type share theirs), kept for up to kShapesKept shapes per thread.
// A document with an array, or a large one, is inferred each time into `uncached`, so that what
// the cache holds stays under a few MB whatever the rows (I6). Throws Refused as infer() does.
const InferredSchema* infer_cached(std::string_view field, simdjson::dom::element root, std::size_t size,
                                   std::optional<InferredSchema>& uncached) {
  constexpr std::size_t kShapesKept = 64;
  constexpr std::size_t kLargestCached = 8 * 1024;         // a document's bytes
  constexpr std::size_t kLargestCachedSchema = 16 * 1024;  // its schema's
  thread_local std::unordered_map<std::string, InferredSchema> cache;
  const auto infer_one = [&] {
    InferredSchema inferred{*infer(std::string(field), root), {}};
    write_schema(inferred.json, inferred.schema, nullptr);
    return inferred;
  };
  if (size > kLargestCached) return &uncached.emplace(infer_one());
  thread_local std::string shape;  // no longer than the document
  shape.assign(field);
  shape += '\0';
  if (!append_shape(shape, root)) return &uncached.emplace(infer_one());
  if (const auto it = cache.find(shape); it != cache.end()) return &it->second;
  auto inferred = infer_one();
  if (inferred.json.size() > kLargestCachedSchema) return &uncached.emplace(std::move(inferred));
  if (cache.size() >= kShapesKept) cache.clear();
  return &cache.emplace(shape, std::move(inferred)).first->second;
}

}  // namespace

std::variant<Expanded, KeptAsString, Unpublishable> expand(std::string_view json, std::string_view field,
                                                           bool schemas) {
  // The router expands only a string that starts with '{' or '[' as it is (no whitespace first).
  if (json.empty() || (json.front() != '{' && json.front() != '[')) {
    return KeptAsString{"the payload does not start with '{' or '['"};
  }
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (const auto error = parser.parse(json.data(), json.size()).get(root); error != simdjson::SUCCESS) {
    return KeptAsString{fmt::format("the payload is not JSON ({})", simdjson::error_message(error))};
  }
  if (!root.is_object()) {
    try {
      (void)infer(std::string(field), root);
    } catch (const Refused& refused) {
      return KeptAsString{refused.why};
    }
    return Unpublishable{
        "table.expand.json.payload: Debezium infers a schema for a top-level JSON array and then cannot build its "
        "value (its task stops); only an object is expanded"};
  }
  const InferredSchema* schema = nullptr;
  std::optional<InferredSchema> uncached;
  try {
    schema = infer_cached(field, root, json.size(), uncached);
  } catch (const Refused& refused) {
    return KeptAsString{refused.why};
  }
  // Written straight into the value: the schema as cached, then the document under it.
  Expanded out;
  out.value.reserve((schemas ? schema->json.size() + 24 : 0) + json.size() + json.size() / 4);
  if (schemas) {
    out.value += "{\"schema\":";
    out.value += schema->json;
    out.value += ",\"payload\":";
  }
  try {
    write_value(out.value, root, schema->schema);
    if (schemas) out.value += '}';
  } catch (const Unstorable& unstorable) {
    return Unpublishable{fmt::format(
        "table.expand.json.payload: the payload holds {}, which Debezium's inferred schema cannot store (its task "
        "stops)",
        unstorable.why)};
  }
  return out;
}

std::variant<std::vector<DecodedField>, Unpublishable> decode_envelope(std::string_view json) {
  // The SMT reads only content that starts with '{' or '[', and casts what it infers to a struct.
  if (json.empty() || json.front() != '{') {
    return Unpublishable{
        "Debezium's DecodeLogicalDecodingMessageContent decodes only an envelope that starts with '{' (its task "
        "stops)"};
  }
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (const auto error = parser.parse(json.data(), json.size()).get(root); error != simdjson::SUCCESS) {
    return Unpublishable{fmt::format("the envelope is not JSON ({})", simdjson::error_message(error))};
  }
  Schema schema;
  try {
    schema = infer(std::nullopt, root);
  } catch (const Refused& refused) {
    return Unpublishable{
        fmt::format("Debezium cannot infer a schema for the envelope: {} (its task stops)", refused.why)};
  }
  if (!schema || schema->kind != Inferred::Kind::structure) {
    return Unpublishable{"the envelope is not a JSON object"};
  }
  const auto fields = fields_of(object_of(root));
  std::vector<DecodedField> out;
  out.reserve(schema->fields.size());
  for (const auto& [name, sub] : schema->fields) {
    DecodedField field{name, {}, {}, std::nullopt};
    write_schema(field.schema, sub, nullptr);
    for (const auto& [field_name, value] : fields) {
      if (field_name != name) continue;
      try {
        write_value(field.value, value, sub);
      } catch (const Unstorable& unstorable) {
        return Unpublishable{fmt::format(
            "the envelope's field \"{}\" holds {}, which Debezium's inferred schema cannot store (its task stops)",
            name, unstorable.why)};
      }
      if (std::string_view text; value.get_string().get(text) == simdjson::SUCCESS) field.text.emplace(text);
    }
    out.push_back(std::move(field));
  }
  return out;
}

}  // namespace pgoutbox::outbox::debezium
