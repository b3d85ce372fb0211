#pragma once

// The one table of configuration keys (keys.cpp). Each entry knows its documentation, how to
// parse a scalar into the typed Config and how to print the value back (redacted), so the loader,
// the environment overrides, describe() and the reference are all driven by it.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pgoutbox/config/config.h"

namespace pgoutbox::config::detail {

// A YAML scalar or an environment value. null is YAML's null (plain null, ~ or nothing).
struct Scalar {
  std::string text;
  bool null = false;
};

// The loader's working state: the Config plus what resolves into it only at the end.
struct Draft {
  Config config;
  std::optional<std::string> password_file;
  std::optional<std::string> signing_key_file;  // checkpoint.signing_key_file
};

enum class Shape { scalar, property_map, table_list, message_list };

template <class Root>
struct Entry {
  std::string path;  // relative to Root: "postgres.slot", or for a table "columns.id"
  std::string type;
  std::string description;
  bool required = false;
  bool secret = false;    // the value never appears in a message or in describe()
  bool in_file = true;    // false: the environment alone may set it
  bool nullable = false;  // YAML null is a value (no column, off)
  bool described = true;  // false: not part of Config, so describe() has nothing to show
  Shape shape = Shape::scalar;
  std::function<void(Root&, const Scalar&)> set;  // throws Invalid; never called with null unless nullable
  std::function<std::string(const Root&)> show;   // as it would be written in the file, secrets redacted
};

const std::vector<Entry<Draft>>& global_entries();
const std::vector<Entry<TableConfig>>& table_entries();
const std::vector<Entry<MessageConfig>>& message_entries();

// NAMEDATALEN - 1: Postgres truncates longer names, which would silently name something else.
inline constexpr std::size_t kMaxNameBytes = 63;

inline constexpr std::string_view kEnvPrefix = "PGOUTBOX_";
inline constexpr std::string_view kTablesPath = "tables";
inline constexpr std::string_view kPropertiesPath = "kafka.properties";
inline constexpr std::string_view kPropertyEnvPrefix = "PGOUTBOX_KAFKA_PROPERTY_";
inline constexpr std::string_view kTablesEnvPrefix = "PGOUTBOX_TABLES_";
inline constexpr std::string_view kMessagesPath = "messages";
inline constexpr std::string_view kMessagesEnvPrefix = "PGOUTBOX_MESSAGES_";

// The naming rule: PGOUTBOX_ + path upper-cased, '.' written as '_'.
std::string env_name(std::string_view path);
// The part after PGOUTBOX_TABLES_<i>_ (or PGOUTBOX_MESSAGES_<i>_) for a list entry's key.
std::string table_env_suffix(std::string_view relative_path);
// PGOUTBOX_KAFKA_PROPERTY_<NAME> -> the librdkafka property; "" when NAME is not a property name.
std::string property_from_env(std::string_view name);

}  // namespace pgoutbox::config::detail
