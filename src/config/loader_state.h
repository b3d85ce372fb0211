#pragma once

// The loader's state across its three steps: the YAML file (loader.cpp), the environment
// overrides (env_overrides.cpp) and the checks that need the merged result (resolve.cpp).

#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "fields.h"
#include "pgoutbox/config/loader.h"
#include "values.h"

namespace pgoutbox::config::detail {

// Where a value was written, for messages and for resolving relative paths.
struct Origin {
  std::string where;  // the file, or "environment variable NAME"
  int line = 0;       // 1-based; 0 when unknown
  int column = 0;
  bool from_env = false;
  std::string base_dir;  // relative paths given here are taken from this folder; empty: the working folder
};

class Loader {
 public:
  Loader(std::string source, std::string base_dir, const Environment& env);
  Config run(const std::string& yaml);

 private:
  struct Property {
    std::string value;
    Origin origin;
  };

  // loader.cpp
  Origin at(const YAML::Mark& mark) const;
  Origin at(const YAML::Node& node, const YAML::Node& fallback) const;
  template <class Root>
  void walk_map(const YAML::Node& map, const Origin& map_origin, const std::string& relative_prefix,
                const std::string& shown_prefix, const std::vector<Entry<Root>>& entries, Root& root);
  template <class Root>
  [[noreturn]] void unknown_key(const Origin& origin, const std::string& key, const std::string& relative_prefix,
                                const std::string& shown_prefix, const std::vector<Entry<Root>>& entries);
  void read_properties(const YAML::Node& node, const Origin& origin);
  // tables: and messages:, each a list of maps.
  template <class Item>
  void read_list(const YAML::Node& node, const Origin& origin, std::string_view path, std::string_view list_of,
                 std::string_view item_needs, const std::vector<Entry<Item>>& entries, std::vector<Item>& out);

  // env_overrides.cpp
  void apply_environment();
  // PGOUTBOX_TABLES_<i>_<KEY> and PGOUTBOX_MESSAGES_<i>_<KEY>, by index.
  template <class Item>
  void apply_list_variables(const std::map<std::size_t, std::map<std::string, std::string>>& by_index,
                            std::string_view path, std::string_view env_prefix, const std::vector<Entry<Item>>& entries,
                            std::vector<Item>& items);

  // resolve.cpp
  void check_required();
  void resolve_password();
  void resolve_signing_key();
  void resolve_properties();
  void check_tables();
  std::string database_name() const;
  void check_format(FormatConfig& format, bool has_type_source, const std::string& type_key,
                    const std::string& reference, const std::string& source_path,
                    const std::function<void(const std::string&, const std::string&)>& fail_at);
  void check_messages();
  void check_reserved_topics();
  void check_reconnect();
  void check_delivery();
  // `if_written`, when not empty: why nobody else may write the file, which is then refused if
  // someone can (file_read.h write_refusal).
  std::string read_secret_file(const std::string& path, const Origin& origin, const std::string& key,
                               const std::string& if_written = "");

  Origin file_origin() const { return {source_, 0, 0, false, base_dir_}; }

  std::string source_;
  std::string base_dir_;
  const Environment& env_;
  Draft draft_;
  std::map<std::string, Origin> origins_;  // concrete key path ("tables[1].topic") -> where it was set
  std::map<std::string, Property> file_properties_;
  std::map<std::string, Property> env_properties_;
};

[[noreturn]] void fail(const Origin& origin, const std::string& key, const std::string& problem);

// Parses and stores one value; null is refused unless the key is nullable.
template <class Root>
void apply_scalar(const Entry<Root>& entry, Root& root, const Scalar& value, const Origin& origin,
                  const std::string& shown_key) {
  if (value.null && !entry.nullable) {
    if (entry.required) fail(origin, shown_key, "needs a value");
    fail(origin, shown_key, "has no value; leave the key out to use the default (" + entry.show(Root{}) + ")");
  }
  try {
    entry.set(root, value);
  } catch (const Invalid& e) {
    fail(origin, shown_key, e.what());
  }
}

}  // namespace pgoutbox::config::detail
