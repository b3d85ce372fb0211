#pragma once

// Every configuration key, described once. The same table drives the YAML loader, the
// environment overrides and the generated reference, so the three cannot drift apart.

#include <string>
#include <vector>

namespace pgoutbox::config {

struct KeyInfo {
  std::string path;           // "postgres.slot"; list entries as "tables[].topic"; "kafka.properties" is a map
  std::string type;           // "string", "duration", "size", "bool", ...
  std::string default_value;  // as it would be written in the file; empty for required keys
  bool required = false;
  std::string description;
  std::string env;      // "PGOUTBOX_POSTGRES_SLOT", "PGOUTBOX_TABLES_<i>_TOPIC", ...
  bool secret = false;  // the value is never printed
  bool in_file = true;  // false: only the environment may set it
};

// Sections first, in the order of the example configuration.
std::vector<KeyInfo> schema();

// The configuration reference as a Markdown table, with the environment naming rule.
std::string reference_markdown();

}  // namespace pgoutbox::config
