#include "pgoutbox/config/redact.h"

#include <fmt/format.h>

#include <algorithm>

#include "dsn.h"
#include "fields.h"

namespace pgoutbox::config {

std::string redact_dsn(const std::string& dsn) {
  auto scan = detail::scan_dsn(dsn);
  std::string out = dsn;
  if (scan.error) {
    // Past the point the scan understood, a secret could be anywhere.
    scan.secret_ranges.erase(std::remove_if(scan.secret_ranges.begin(), scan.secret_ranges.end(),
                                            [&](const auto& r) { return r.first >= scan.error_at; }),
                             scan.secret_ranges.end());
    out.replace(scan.error_at, std::string::npos, kRedacted);
  }
  std::sort(scan.secret_ranges.begin(), scan.secret_ranges.end());
  for (auto it = scan.secret_ranges.rbegin(); it != scan.secret_ranges.rend(); ++it) {
    out.replace(it->first, it->second - it->first, kRedacted);
  }
  return out;
}

bool is_secret_property(std::string_view name) {
  return name.find("password") != std::string_view::npos || name.find("secret") != std::string_view::npos ||
         name == "ssl.key.pem" || name == "sasl.oauthbearer.config";
}

std::map<std::string, std::string> redact_properties(const std::map<std::string, std::string>& properties) {
  auto out = properties;
  for (auto& [name, value] : out) {
    if (is_secret_property(name)) value = kRedacted;
  }
  return out;
}

namespace {

// The secret values of `dsn`, as written and as libpq reads them; a dbname that is itself a
// connection string (libpq expands it once) is searched too.
void add_dsn_secrets(std::string_view dsn, int depth, std::vector<std::string>& out) {
  const auto scan = detail::scan_dsn(dsn);
  for (const auto& [begin, end] : scan.secret_ranges) {
    std::string_view written = dsn.substr(begin, end - begin);
    // A quoted key=value value: libpq quotes what is inside.
    if (written.size() >= 2 && written.front() == '\'' && written.back() == '\'') {
      written = written.substr(1, written.size() - 2);
    }
    out.emplace_back(written);
  }
  for (const auto& [keyword, value] : scan.params) {
    if (detail::is_secret_dsn_keyword(keyword)) out.push_back(value);
    if (keyword == "dbname" && depth == 0) add_dsn_secrets(value, depth + 1, out);
  }
}

}  // namespace

std::vector<std::string> secrets_of(const Config& config) {
  std::vector<std::string> out;
  out.push_back(config.postgres.password);
  out.push_back(config.checkpoint.signing_key);
  add_dsn_secrets(config.postgres.dsn, 0, out);
  for (const auto& [name, value] : config.kafka.properties) {
    if (is_secret_property(name)) out.push_back(value);
  }
  std::erase_if(out, [](const std::string& s) { return s.empty(); });
  return out;
}

std::string describe(const Config& config) {
  using namespace detail;
  std::string out = fmt::format("configuration from {}\n", config.source.empty() ? "(defaults)" : config.source);
  Draft draft;
  draft.config = config;
  for (const auto& e : global_entries()) {
    if (!e.described) continue;
    switch (e.shape) {
      case Shape::scalar:
        if (e.secret) {
          out += fmt::format("  {}: {}\n", e.path, e.show(draft).empty() ? "(not set)" : e.show(draft));
        } else {
          const std::string value = e.show(draft);
          out += fmt::format("  {}: {}\n", e.path, value.empty() ? "\"\"" : value);
        }
        break;
      case Shape::property_map:
        for (const auto& [name, value] : redact_properties(config.kafka.properties))
          out += fmt::format("  {}.{}: {}\n", e.path, name, value);
        break;
      case Shape::table_list:
        for (std::size_t i = 0; i < config.tables.size(); ++i) {
          for (const auto& t : table_entries())
            out += fmt::format("  {}[{}].{}: {}\n", e.path, i, t.path, t.show(config.tables[i]));
        }
        break;
      case Shape::message_list:
        for (std::size_t i = 0; i < config.messages.size(); ++i) {
          for (const auto& m : message_entries())
            out += fmt::format("  {}[{}].{}: {}\n", e.path, i, m.path, m.show(config.messages[i]));
        }
        break;
    }
  }
  return out;
}

}  // namespace pgoutbox::config
