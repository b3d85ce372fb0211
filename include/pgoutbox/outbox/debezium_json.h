#pragma once

// The bytes Debezium's outbox event router writes through Kafka Connect's JsonConverter
// (docs/migrating.md "Record formats"): a key or value is {"schema": S, "payload": P} with
// schemas.enable=true, or P alone with false. S is the Connect schema Debezium's Postgres
// connector gives the column (its type, whether it is nullable, a logical name for uuid and
// json/jsonb); P is the column's value as JsonConverter writes it (Jackson's compact output).
// With table.expand.json.payload the router parses a JSON payload into a Connect struct whose
// schema it infers from the document (io.debezium.transforms.outbox.JsonSchemaData); expand()
// does the same inference. Everything here is an encoder: the only parsing is simdjson's.

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace pgoutbox::outbox::debezium {

// A Connect schema of a column: its type ("string", "int16", "int32", "int64", "bytes"),
// optional unless the column is NOT NULL, and the logical name and version Debezium adds.
struct ColumnSchema {
  std::string type;
  bool optional = true;
  std::string name;  // empty: none
  int version = 0;   // 0: none
};

// The schema as JsonConverter writes it: {"type":…,"optional":…[,"name":…,"version":…]}.
std::string schema_json(const ColumnSchema& schema);

// A JSON string as Jackson 2.21 writes it: '"' and '\' escaped, control characters as \b \t \n
// \f \r or \u00XX (upper-case hex), a character beyond the BMP as its UTF-16 surrogate pair
// escaped (\uD83D\uDE00), everything else (other non-ASCII included) as it is.
void append_json_string(std::string& out, std::string_view text);
std::string json_string(std::string_view text);

// Standard Base64 with padding: JsonConverter's form of Connect bytes.
std::string base64(std::string_view bytes);

// A Java double as Double.toString writes it (the shortest digits that read back the same, as
// JDK 19 and later choose them): 1.5, 100.0, 1.0E10, 1.0E-5, 0.0.
std::string java_double(double value);

// {"schema":S,"payload":P} when schemas, else P.
std::string envelope(bool schemas, std::string_view schema, std::string_view payload);
// The same with P the JSON string of `text`, written in place (no copy of the escaped text).
std::string string_envelope(bool schemas, std::string_view schema, std::string_view text);

// A payload expanded as the router's table.expand.json.payload does it, as JsonConverter writes
// the value: {"schema":S,"payload":P} when schemas, else P, with S the inferred struct schema and
// P the document under it.
struct Expanded {
  std::string value;
};
// Why the router would not expand it: it keeps the string (its "JSON expansion failed"
// warning), and so does the caller.
struct KeptAsString {
  std::string why;
};
// A document the router would expand into something JsonConverter then refuses (a number
// beyond a Java long, a non-finite double, a top-level array): Debezium's task stops there, so
// the row is poison here, named by `why`.
struct Unpublishable {
  std::string why;
};
// `field` is the payload column's name: the struct's name, and its nested structs' prefix.
std::variant<Expanded, KeptAsString, Unpublishable> expand(std::string_view json, std::string_view field, bool schemas);

// A message outbox's envelope as Debezium's DecodeLogicalDecodingMessageContent makes it a
// struct for the router: JsonSchemaData's inference over the whole envelope (nulls and empty
// arrays left out, nested structs named by their path from the envelope: "payload",
// "payload.customer"). Each field with its schema and its value as JsonConverter writes them,
// in the envelope's order; `text` holds a string field's own characters.
struct DecodedField {
  std::string name;
  std::string schema;
  std::string value;
  std::optional<std::string> text;
};
// An envelope Debezium cannot decode (not an object, a number beyond a long, an array mixing
// types) stops its task: Unpublishable, with the reason.
std::variant<std::vector<DecodedField>, Unpublishable> decode_envelope(std::string_view json);

}  // namespace pgoutbox::outbox::debezium
