#include <fmt/format.h>
#include <unistd.h>

#include "loader_state.h"
#include "pgoutbox/config/loader.h"

namespace pgoutbox::config {
namespace {

std::string format_message(const std::string& where, int line, int column, const std::string& key,
                           const std::string& problem) {
  std::string out = where;
  if (line > 0) out += fmt::format(":{}", line);
  if (line > 0 && column > 0) out += fmt::format(":{}", column);
  out += ": ";
  if (!key.empty()) out += key + ": ";
  return out + problem;
}

}  // namespace

ConfigError::ConfigError(std::string where, int line, int column, std::string key, std::string problem)
    : std::runtime_error(format_message(where, line, column, key, problem)),
      where_(std::move(where)),
      line_(line),
      column_(column),
      key_(std::move(key)),
      problem_(std::move(problem)) {}

Environment Environment::from_process() {
  std::map<std::string, std::string> variables;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::size_t eq = text.find('=');
    if (eq == std::string_view::npos) continue;
    variables.emplace(text.substr(0, eq), text.substr(eq + 1));
  }
  return Environment(std::move(variables));
}

std::optional<std::string> Environment::get(const std::string& name) const {
  const auto it = variables_.find(name);
  if (it == variables_.end()) return std::nullopt;
  return it->second;
}

namespace detail {

void fail(const Origin& origin, const std::string& key, const std::string& problem) {
  throw ConfigError(origin.where, origin.line, origin.column, key, problem);
}

}  // namespace detail
}  // namespace pgoutbox::config
