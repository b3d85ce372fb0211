#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "dsn.h"
#include "fields.h"
#include "loader_state.h"
#include "pgoutbox/config/loader.h"
#include "pgoutbox/config/redact.h"

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

namespace {

// A variable the loader takes a secret from: the password, the signing key, a secret librdkafka
// property, or a DSN that holds a password. Their _FILE variants hold paths, not secrets.
bool holds_secret(std::string_view name, std::string_view value) {
  using namespace detail;
  if (name.ends_with("_FILE")) return false;
  if (name.starts_with(kPropertyEnvPrefix)) return is_secret_property(property_from_env(name));
  if (name == env_name("postgres.dsn")) return !scan_dsn(value).secret_ranges.empty();
  for (const auto& e : global_entries()) {
    if (e.secret && name == env_name(e.path)) return true;
  }
  return false;
}

}  // namespace

void forget_secret_variables() {
  std::vector<std::string> names;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    char* eq = std::strchr(*entry, '=');
    if (eq == nullptr) continue;
    const std::string_view name(*entry, static_cast<std::size_t>(eq - *entry));
    if (!name.starts_with(detail::kEnvPrefix) || !holds_secret(name, eq + 1)) continue;
    // The bytes themselves: unsetenv only drops the pointer, and /proc/<pid>/environ shows the
    // block the kernel copied at exec.
    std::memset(eq + 1, 0, std::strlen(eq + 1));
    names.emplace_back(name);
  }
  for (const auto& name : names) ::unsetenv(name.c_str());
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
