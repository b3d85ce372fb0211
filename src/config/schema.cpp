// The schema as the outside sees it (schema.h), the environment naming rule, and the generated
// reference, all read off the one key table in keys.cpp.

#include <fmt/format.h>

#include "fields.h"
#include "pgoutbox/config/schema.h"

namespace pgoutbox::config::detail {
namespace {

// librdkafka spells these few with '_'; every other string-settable property uses '.' alone,
// which is what lets PGOUTBOX_KAFKA_PROPERTY_ names map back unambiguously.
constexpr std::string_view kUnderscoreProperties[] = {"log_level", "enabled_events"};

std::string upper_underscored(std::string_view path) {
  std::string out;
  for (char c : path) out += c == '.' ? '_' : (c >= 'a' && c <= 'z') ? char(c - 'a' + 'A') : c;
  return out;
}

std::string escape_cell(std::string_view text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

std::string env_name(std::string_view path) { return std::string(kEnvPrefix) + upper_underscored(path); }

std::string table_env_suffix(std::string_view relative_path) { return upper_underscored(relative_path); }

std::string property_from_env(std::string_view name) {
  std::string rest(name.substr(std::min(name.size(), kPropertyEnvPrefix.size())));
  if (rest.empty()) return {};
  for (char& c : rest) {
    if (c >= 'A' && c <= 'Z')
      c = char(c - 'A' + 'a');
    else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
      return {};
  }
  std::string suffix;
  if (rest.size() > 5 && rest.ends_with("_file")) {
    suffix = "_file";
    rest.resize(rest.size() - 5);
  }
  bool underscored = false;
  for (const auto known : kUnderscoreProperties) underscored = underscored || rest == known;
  if (!underscored) {
    for (char& c : rest) c = c == '_' ? '.' : c;
  }
  if (rest.front() == '.' || rest.back() == '.' || rest.find("..") != std::string::npos) return {};
  return rest + suffix;
}

}  // namespace pgoutbox::config::detail

namespace pgoutbox::config {

std::vector<KeyInfo> schema() {
  using namespace detail;
  std::vector<KeyInfo> keys;
  const Draft defaults;
  for (const auto& e : global_entries()) {
    KeyInfo key{e.path,     e.type,        e.required ? std::string() : e.show(defaults),
                e.required, e.description, env_name(e.path),
                e.secret,   e.in_file};
    if (e.shape == Shape::property_map) {
      key.default_value = "{}";
      key.env = std::string(kPropertyEnvPrefix) + "<NAME>";
    }
    if (e.shape == Shape::table_list) key.env = std::string(kTablesEnvPrefix) + "<i>_<KEY>";
    if (e.shape == Shape::message_list) key.env = std::string(kMessagesEnvPrefix) + "<i>_<KEY>";
    keys.push_back(std::move(key));
    if (e.shape == Shape::message_list) {
      const MessageConfig message_defaults;
      for (const auto& m : message_entries()) {
        keys.push_back({std::string(kMessagesPath) + "[]." + m.path, m.type,
                        m.required ? std::string() : m.show(message_defaults), m.required, m.description,
                        std::string(kMessagesEnvPrefix) + "<i>_" + table_env_suffix(m.path), m.secret, m.in_file});
      }
    }
    if (e.shape != Shape::table_list) continue;
    const TableConfig table_defaults;
    for (const auto& t : table_entries()) {
      keys.push_back({std::string(kTablesPath) + "[]." + t.path, t.type,
                      t.required ? std::string() : t.show(table_defaults), t.required, t.description,
                      std::string(kTablesEnvPrefix) + "<i>_" + table_env_suffix(t.path), t.secret, t.in_file});
    }
  }
  return keys;
}

std::string reference_markdown() {
  std::string out =
      "Every key can be overridden by an environment variable: `PGOUTBOX_` followed by the key path in upper case with "
      "`.` written as `_` (`postgres.dsn` is `PGOUTBOX_POSTGRES_DSN`). List entries are addressed by index from 0 "
      "(`PGOUTBOX_TABLES_0_TOPIC`), and a new index right after the last table adds one. librdkafka properties are "
      "`PGOUTBOX_KAFKA_PROPERTY_<NAME>` with `.` written as `_` (`PGOUTBOX_KAFKA_PROPERTY_SASL_PASSWORD` sets "
      "`sasl.password`; a trailing `_FILE` reads the value from a file). Values are read as the key's YAML type; "
      "`null`, "
      "`~` or an empty value is YAML's null.\n\n"
      "Durations take `ms`, `s`, `m` and `h` (`1m30s`); sizes are bytes or `KiB`, `MiB`, `GiB`. Secrets are never "
      "logged: the Postgres password comes from `PGOUTBOX_POSTGRES_PASSWORD` or `postgres.password_file`.\n\n"
      "| Key | Type | Default | Required | Environment variable | Description |\n"
      "|---|---|---|---|---|---|\n";
  for (const auto& key : schema()) {
    const std::string default_cell = key.required                ? "—"
                                     : key.default_value.empty() ? "none"
                                                                 : "`" + detail::escape_cell(key.default_value) + "`";
    out += fmt::format("| `{}` | {} | {} | {} | `{}` | {}{} |\n", key.path, detail::escape_cell(key.type), default_cell,
                       key.required ? "yes" : "no", key.env, detail::escape_cell(key.description),
                       key.in_file ? "" : " (environment only)");
  }
  return out;
}

}  // namespace pgoutbox::config
