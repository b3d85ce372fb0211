// PGOUTBOX_* variables over the file: PGOUTBOX_ + key path upper-cased with '.' as '_', list
// entries by index, librdkafka properties as PGOUTBOX_KAFKA_PROPERTY_<NAME>.

#include <fmt/format.h>

#include "loader_state.h"
#include "suggest.h"

namespace pgoutbox::config::detail {
namespace {

Origin env_origin(const std::string& name) { return {"environment variable " + name, 0, 0, true, ""}; }

// Values read as plain YAML scalars of the key's type, so `null` and `~` mean what they mean in
// the file. Secrets are taken verbatim: a password may well be "null".
Scalar env_scalar(bool secret, const std::string& value) {
  if (secret) return {value, false};
  const bool null = value.empty() || value == "~" || value == "null" || value == "Null" || value == "NULL";
  return {value, null};
}

// Families of names that carry a variable part; a misspelt family name gets a suggestion too.
// The misspelling must end at a '_' so the variable part is cut where the writer cut it.
std::optional<std::string> near_family(std::string_view rest) {
  std::optional<std::string> best;
  std::size_t best_distance = 4;
  for (const std::string_view family : {kTablesEnvPrefix, kPropertyEnvPrefix}) {
    const std::string_view wanted = family.substr(kEnvPrefix.size());
    const std::size_t tolerance = wanted.size() > 9 ? 3 : 1;
    for (std::size_t length = 1; length <= rest.size() && length <= wanted.size() + tolerance; ++length) {
      if (rest[length - 1] != '_') continue;
      const std::size_t distance = edit_distance(rest.substr(0, length), wanted);
      if (distance > 0 && distance <= tolerance && distance < best_distance) {
        best = std::string(family) + std::string(rest.substr(length));
        best_distance = distance;
      }
    }
  }
  return best;
}

}  // namespace

void Loader::apply_environment() {
  std::map<std::string, const Entry<Draft>*> by_name;
  std::vector<std::string> known;  // without the PGOUTBOX_ prefix, for suggestions
  for (const auto& e : global_entries()) {
    if (e.shape != Shape::scalar) continue;
    by_name[env_name(e.path)] = &e;
    known.push_back(env_name(e.path).substr(kEnvPrefix.size()));
  }

  std::map<std::size_t, std::map<std::string, std::string>> table_variables;  // index -> name -> value
  std::map<std::size_t, std::map<std::string, std::string>> message_variables;
  for (const auto& [name, value] : env_.variables()) {
    if (!name.starts_with(kEnvPrefix)) continue;
    const Origin origin = env_origin(name);
    if (const auto it = by_name.find(name); it != by_name.end()) {
      const auto& entry = *it->second;
      apply_scalar(entry, draft_, env_scalar(entry.secret, value), origin, entry.path);
      origins_[entry.path] = origin;
      continue;
    }
    if (name.starts_with(kPropertyEnvPrefix)) {
      const std::string property = property_from_env(name);
      if (property.empty()) {
        fail(origin, std::string(kPropertiesPath),
             "is not a property name; write PGOUTBOX_KAFKA_PROPERTY_<NAME> with the property's '.' as '_', e.g. "
             "PGOUTBOX_KAFKA_PROPERTY_LINGER_MS");
      }
      if (value.empty())
        fail(origin, std::string(kPropertiesPath) + "." + property, "is empty; unset the variable instead");
      env_properties_[property] = {value, origin};
      continue;
    }
    if (const bool tables = name.starts_with(kTablesEnvPrefix); tables || name.starts_with(kMessagesEnvPrefix)) {
      const auto prefix = tables ? kTablesEnvPrefix : kMessagesEnvPrefix;
      const std::string rest = name.substr(prefix.size());
      const std::size_t underscore = rest.find('_');
      const std::string index_text = rest.substr(0, underscore);
      const bool canonical = !index_text.empty() && index_text.size() <= 6 &&
                             index_text.find_first_not_of("0123456789") == std::string::npos &&
                             (index_text == "0" || index_text.front() != '0');
      if (!canonical || underscore == std::string::npos) {
        fail(origin, std::string(tables ? kTablesPath : kMessagesPath),
             fmt::format("must be named {}<index>_<KEY>, e.g. {}0_TOPIC", prefix, prefix));
      }
      (tables ? table_variables : message_variables)[std::stoul(index_text)][name] = value;
      continue;
    }
    if (name == env_name(kTablesPath)) {
      fail(origin, std::string(kTablesPath),
           "cannot be set whole; set each table's keys, e.g. PGOUTBOX_TABLES_0_TABLE");
    }
    if (name == env_name(kMessagesPath)) {
      fail(origin, std::string(kMessagesPath),
           "cannot be set whole; set each entry's keys, e.g. PGOUTBOX_MESSAGES_0_PREFIX");
    }
    if (name == env_name(kPropertiesPath)) {
      fail(origin, std::string(kPropertiesPath),
           "cannot be set whole; set each property, e.g. PGOUTBOX_KAFKA_PROPERTY_LINGER_MS");
    }
    // Other PGOUTBOX_ variables belong to other tools (the test harness sets PGOUTBOX_PG_DSN);
    // only a near miss of one of ours is taken for a typo.
    const std::string rest = name.substr(kEnvPrefix.size());
    std::optional<std::string> close = closest(rest, known);
    if (close) close = std::string(kEnvPrefix) + *close;
    if (!close) close = near_family(rest);
    if (close) fail(origin, "", fmt::format("unknown configuration variable; did you mean {}?", *close));
  }
  apply_list_variables(table_variables, kTablesPath, kTablesEnvPrefix, table_entries(), draft_.config.tables);
  apply_list_variables(message_variables, kMessagesPath, kMessagesEnvPrefix, message_entries(), draft_.config.messages);
}

template <class Item>
void Loader::apply_list_variables(const std::map<std::size_t, std::map<std::string, std::string>>& by_index,
                                  std::string_view path, std::string_view env_prefix,
                                  const std::vector<Entry<Item>>& entries, std::vector<Item>& items) {
  const std::string_view noun = path == kTablesPath ? "table" : "message";
  std::map<std::string, const Entry<Item>*> by_suffix;
  std::vector<std::string> suffixes;
  for (const auto& e : entries) {
    by_suffix[table_env_suffix(e.path)] = &e;
    suffixes.push_back(table_env_suffix(e.path));
  }
  for (const auto& [index, variables] : by_index) {
    const Origin first = env_origin(variables.begin()->first);
    const std::string shown_table = fmt::format("{}[{}]", path, index);
    if (index > items.size()) {
      fail(
          first, shown_table,
          fmt::format("would leave a gap: the next new {} is {}[{}] (indexes count from 0)", noun, path, items.size()));
    }
    if (index == items.size()) {
      items.emplace_back();
      origins_[shown_table] = first;
    }
    const std::string prefix = fmt::format("{}{}_", env_prefix, index);
    for (const auto& [name, value] : variables) {
      const Origin origin = env_origin(name);
      const std::string suffix = name.substr(prefix.size());
      const auto it = by_suffix.find(suffix);
      if (it == by_suffix.end()) {
        const auto close = closest(suffix, suffixes);
        fail(origin, shown_table,
             close ? fmt::format("names no {} key; did you mean {}{}?", noun, prefix, *close)
                   : fmt::format("names no {} key", noun));
      }
      const std::string shown = shown_table + "." + it->second->path;
      apply_scalar(*it->second, items[index], env_scalar(it->second->secret, value), origin, shown);
      origins_[shown] = origin;
    }
  }
}

}  // namespace pgoutbox::config::detail
