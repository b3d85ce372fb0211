#include "pgoutbox/config/loader.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "file_read.h"
#include "loader_state.h"
#include "suggest.h"
#include "yaml_lint.h"

namespace pgoutbox::config {
namespace detail {
namespace {

template <class Root>
const Entry<Root>* find_entry(const std::vector<Entry<Root>>& entries, std::string_view path) {
  for (const auto& e : entries) {
    if (e.path == path) return &e;
  }
  return nullptr;
}

template <class Root>
bool is_section(const std::vector<Entry<Root>>& entries, const std::string& path) {
  for (const auto& e : entries) {
    if (e.path.starts_with(path + ".")) return true;
  }
  return false;
}

// The keys a map at this prefix takes, in schema order.
template <class Root>
std::vector<std::string> keys_under(const std::vector<Entry<Root>>& entries, const std::string& prefix) {
  std::vector<std::string> keys;
  for (const auto& e : entries) {
    if (!e.in_file || !e.path.starts_with(prefix)) continue;
    std::string key = e.path.substr(prefix.size());
    key = key.substr(0, key.find('.'));
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  return keys;
}

// Every key path a file may hold, for a key written in the wrong section.
std::vector<std::string> all_file_paths() {
  std::vector<std::string> paths;
  for (const auto& e : global_entries()) {
    if (e.in_file) paths.push_back(e.path);
  }
  for (const auto& e : table_entries()) paths.push_back(std::string(kTablesPath) + "[]." + e.path);
  for (const auto& e : message_entries()) paths.push_back(std::string(kMessagesPath) + "[]." + e.path);
  return paths;
}

std::string last_segment(const std::string& path) { return path.substr(path.rfind('.') + 1); }

const char* node_kind(const YAML::Node& node) {
  if (node.IsMap()) return "map";
  if (node.IsSequence()) return "list";
  if (node.IsNull()) return "null";
  return "single value";
}

std::string read_whole_file(const std::string& path) {
  auto content = read_file(path, kMaxConfigBytes);
  if (content.failure == FileContent::Failure::none) {
    const auto refusal = write_refusal(
        path, content, "whoever writes the configuration can name another signing key or route rows anywhere");
    if (!refusal.empty()) throw ConfigError(path, 0, 0, "", "the configuration file " + refusal);
    return std::move(content.text);
  }
  if (content.failure == FileContent::Failure::open || content.failure == FileContent::Failure::read) {
    const char* verb = content.failure == FileContent::Failure::open ? "open" : "read";
    throw ConfigError(path, 0, 0, "",
                      fmt::format("cannot {} the configuration file: {}", verb, std::strerror(content.error)));
  }
  // A device, a FIFO, a directory or an oversized file: refused before reading it.
  throw ConfigError(path, 0, 0, "", fmt::format("the configuration file {}", content.describe(kMaxConfigBytes)));
}

}  // namespace

Loader::Loader(std::string source, std::string base_dir, const Environment& env)
    : source_(std::move(source)), base_dir_(std::move(base_dir)), env_(env) {}

Origin Loader::at(const YAML::Mark& mark) const {
  Origin origin = file_origin();
  if (!mark.is_null()) {
    origin.line = mark.line + 1;
    origin.column = mark.column + 1;
  }
  return origin;
}

// A value written as nothing (key:) has no position of its own (yaml-cpp reports the next
// token's, or none); its key's is where the reader should look.
Origin Loader::at(const YAML::Node& node, const YAML::Node& fallback) const {
  return node.IsNull() || node.Mark().is_null() ? at(fallback.Mark()) : at(node.Mark());
}

Config Loader::run(const std::string& yaml) {
  if (const auto lint = lint_yaml(yaml)) {
    Origin origin = file_origin();
    origin.line = lint->line;
    origin.column = lint->column;
    fail(origin, "", lint->problem);
  }
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    fail(at(e.mark), "", fmt::format("not valid YAML: {}", e.msg));
  }
  if (!root.IsNull() && !root.IsMap())
    fail(at(root.Mark()), "", fmt::format("the top level must be a map of keys, not a {}", node_kind(root)));
  walk_map(root, file_origin(), "", "", global_entries(), draft_);
  apply_environment();
  check_required();
  resolve_password();
  resolve_signing_key();
  resolve_properties();
  check_tables();
  check_messages();
  check_reconnect();
  check_delivery();
  check_reserved_topics();
  draft_.config.source = source_;
  if (const auto it = origins_.find("metrics_address"); it != origins_.end()) {
    const Origin& o = it->second;
    draft_.config.metrics_address_origin =
        o.from_env ? o.where
                   : fmt::format("{}{}: metrics_address", o.where,
                                 o.line > 0 ? fmt::format(":{}:{}", o.line, o.column) : std::string());
  }
  return std::move(draft_.config);
}

template <class Root>
void Loader::walk_map(const YAML::Node& map, const Origin& map_origin, const std::string& relative_prefix,
                      const std::string& shown_prefix, const std::vector<Entry<Root>>& entries, Root& root) {
  if (map.IsNull()) return;  // "limits:" with nothing under it keeps the defaults
  const std::string section = shown_prefix.empty() ? std::string() : shown_prefix.substr(0, shown_prefix.size() - 1);
  if (!map.IsMap()) fail(map_origin, section, fmt::format("must be a map of keys, not a {}", node_kind(map)));
  std::set<std::string> seen;
  for (const auto& pair : map) {
    // Copies: GCC 12 sees yaml-cpp's iterator proxy as a dangling temporary otherwise.
    const YAML::Node key_node = pair.first;
    const YAML::Node value = pair.second;
    const Origin key_origin = at(key_node.Mark());
    if (!key_node.IsScalar()) fail(key_origin, section, "has a key that is not a plain name");
    const std::string& key = key_node.Scalar();
    const std::string shown = shown_prefix + key;
    if (!seen.insert(key).second) fail(key_origin, shown, "is given twice");
    const std::string relative = relative_prefix + key;
    const Origin value_origin = at(value, key_node);
    if (const auto* entry = find_entry(entries, relative)) {
      if (!entry->in_file) {
        const bool has_file_variant = find_entry(entries, relative + "_file") != nullptr;
        fail(key_origin, shown,
             fmt::format("is a secret and is not read from the configuration file; set {}{}", env_name(relative),
                         has_file_variant ? " or " + relative + "_file" : ""));
      }
      switch (entry->shape) {
        case Shape::scalar: {
          if (value.IsMap() || value.IsSequence()) {
            fail(value_origin, shown, fmt::format("must be a {}, not a {}", entry->type, node_kind(value)));
          }
          apply_scalar(*entry, root, Scalar{value.IsNull() ? std::string() : value.Scalar(), value.IsNull()},
                       value_origin, shown);
          origins_[shown] = value_origin;
          break;
        }
        case Shape::property_map:
          read_properties(value, value_origin);
          break;
        case Shape::table_list:
          origins_[shown] = value_origin;
          read_list(value, value_origin, kTablesPath, "of tables (- table: public.outbox)", "table:", table_entries(),
                    draft_.config.tables);
          break;
        case Shape::message_list:
          origins_[shown] = value_origin;
          read_list(value, value_origin, kMessagesPath, "of message outboxes (- prefix: outbox)",
                    "prefix:", message_entries(), draft_.config.messages);
          break;
      }
      continue;
    }
    if (is_section(entries, relative)) {
      walk_map(value, value_origin, relative + ".", shown + ".", entries, root);
      continue;
    }
    unknown_key(key_origin, key, relative_prefix, shown_prefix, entries);
  }
}

template <class Root>
void Loader::unknown_key(const Origin& origin, const std::string& key, const std::string& relative_prefix,
                         const std::string& shown_prefix, const std::vector<Entry<Root>>& entries) {
  const auto siblings = keys_under(entries, relative_prefix);
  if (const auto close = closest(key, siblings))
    fail(origin, shown_prefix + key, fmt::format("unknown key; did you mean {}{}?", shown_prefix, *close));
  // Written in the wrong section: suggest where it belongs.
  const auto paths = all_file_paths();
  std::vector<std::string> last_segments;
  last_segments.reserve(paths.size());
  for (const auto& path : paths) last_segments.push_back(last_segment(path));
  if (const auto close = closest(key, last_segments)) {
    const auto index = std::find(last_segments.begin(), last_segments.end(), *close) - last_segments.begin();
    fail(origin, shown_prefix + key, fmt::format("unknown key here; did you mean {}?", paths[std::size_t(index)]));
  }
  std::string list;
  for (const auto& sibling : siblings) list += (list.empty() ? "" : ", ") + sibling;
  const std::string section = shown_prefix.empty() ? "the top level" : shown_prefix.substr(0, shown_prefix.size() - 1);
  fail(origin, shown_prefix + key, fmt::format("unknown key; {} takes {}", section, list));
}

void Loader::read_properties(const YAML::Node& node, const Origin& origin) {
  const std::string path(kPropertiesPath);
  if (node.IsNull()) return;
  if (!node.IsMap())
    fail(origin, path, fmt::format("must be a map of librdkafka property names to values, not a {}", node_kind(node)));
  for (const auto& pair : node) {
    const YAML::Node key_node = pair.first;
    const YAML::Node value = pair.second;
    const Origin key_origin = at(key_node.Mark());
    if (!key_node.IsScalar() || key_node.Scalar().empty())
      fail(key_origin, path, "has a key that is not a property name");
    const std::string& name = key_node.Scalar();
    const std::string shown = fmt::format("{}.{}", path, name);
    if (name.find_first_of(" \t") != std::string::npos)
      fail(key_origin, shown, "is not a librdkafka property name (it has a space)");
    if (file_properties_.contains(name)) fail(key_origin, shown, "is given twice");
    const Origin value_origin = at(value, key_node);
    if (value.IsNull()) fail(value_origin, shown, "has no value; librdkafka properties are strings");
    if (!value.IsScalar()) fail(value_origin, shown, fmt::format("must be a string, not a {}", node_kind(value)));
    file_properties_[name] = {value.Scalar(), value_origin};
  }
}

template <class Item>
void Loader::read_list(const YAML::Node& node, const Origin& origin, std::string_view path, std::string_view list_of,
                       std::string_view item_needs, const std::vector<Entry<Item>>& entries, std::vector<Item>& out) {
  if (node.IsNull()) return;  // check_required reports a missing list, also considering the environment
  if (!node.IsSequence()) {
    fail(origin, std::string(path), fmt::format("must be a list {}, not a {}", list_of, node_kind(node)));
  }
  for (std::size_t i = 0; i < node.size(); ++i) {
    const YAML::Node item = node[i];
    const std::string shown = fmt::format("{}[{}]", path, i);
    const Origin item_origin = at(item.Mark()).line > 0 ? at(item.Mark()) : origin;
    if (!item.IsMap())
      fail(item_origin, shown, fmt::format("must be a map with at least {}, not a {}", item_needs, node_kind(item)));
    origins_[shown] = item_origin;
    Item entry;
    walk_map(item, item_origin, "", shown + ".", entries, entry);
    out.push_back(std::move(entry));
  }
}

}  // namespace detail

Config load_string(const std::string& yaml, const std::string& source_name, const Environment& env) {
  return detail::Loader(source_name, "", env).run(yaml);
}

Config load(const std::string& path, const Environment& env) {
  const std::string text = detail::read_whole_file(path);
  return detail::Loader(path, std::filesystem::path(path).parent_path().string(), env).run(text);
}

}  // namespace pgoutbox::config
