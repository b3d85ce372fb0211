#include "dsn.h"

#include <fmt/format.h>

namespace pgoutbox::config::detail {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      const int hi = hex_value(text[i + 1]);
      const int lo = hex_value(text[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += char(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

// Mirrors conninfo_parse in libpq's fe-connect.c, including its backslash escapes.
void scan_keyword_value(std::string_view text, DsnScan& scan) {
  std::size_t i = 0;
  for (;;) {
    while (i < text.size() && is_space(text[i])) ++i;
    if (i == text.size()) return;
    const std::size_t key_begin = i;
    while (i < text.size() && text[i] != '=' && !is_space(text[i])) ++i;
    const std::string keyword(text.substr(key_begin, i - key_begin));
    while (i < text.size() && is_space(text[i])) ++i;
    if (i == text.size() || text[i] != '=') {
      scan.error = fmt::format("a keyword is not followed by '=' (at character {})", key_begin + 1);
      scan.error_at = key_begin;
      return;
    }
    if (keyword.empty()) {
      scan.error = fmt::format("'=' has no keyword before it (at character {})", i + 1);
      scan.error_at = key_begin;
      return;
    }
    ++i;
    while (i < text.size() && is_space(text[i])) ++i;
    const std::size_t value_begin = i;
    std::string value;
    if (i < text.size() && text[i] == '\'') {
      ++i;
      for (;;) {
        if (i == text.size()) {
          scan.error = fmt::format("a quoted value is not terminated (at character {})", value_begin + 1);
          scan.error_at = value_begin;
          if (is_secret_dsn_keyword(keyword)) scan.secret_ranges.emplace_back(value_begin, text.size());
          return;
        }
        if (text[i] == '\\') {
          ++i;
          if (i < text.size()) value += text[i++];
        } else if (text[i] == '\'') {
          ++i;
          break;
        } else {
          value += text[i++];
        }
      }
    } else {
      while (i < text.size() && !is_space(text[i])) {
        if (text[i] == '\\') {
          ++i;
          if (i < text.size()) value += text[i++];
        } else {
          value += text[i++];
        }
      }
    }
    if (is_secret_dsn_keyword(keyword)) {
      scan.secret_ranges.emplace_back(value_begin, i);
    } else if (keyword == "dbname" && (value.find('=') != std::string::npos || value.starts_with("postgres"))) {
      // libpq expands a dbname that is itself a connection string; hide it whole if it holds a secret.
      if (!scan_dsn(value).secret_ranges.empty()) scan.secret_ranges.emplace_back(value_begin, i);
    }
    scan.params.emplace_back(keyword, std::move(value));
  }
}

// Mirrors conninfo_uri_parse_options: user info ends at the first '@' before any '/'.
void scan_uri(std::string_view text, std::size_t prefix_length, DsnScan& scan) {
  const std::size_t start = prefix_length;
  const std::size_t stop = text.find_first_of("@/", start);
  std::size_t rest = start;
  if (stop != std::string_view::npos && text[stop] == '@') {
    const std::string_view userinfo = text.substr(start, stop - start);
    const std::size_t colon = userinfo.find(':');
    if (colon == std::string_view::npos) {
      scan.params.emplace_back("user", percent_decode(userinfo));
    } else {
      scan.params.emplace_back("user", percent_decode(userinfo.substr(0, colon)));
      scan.params.emplace_back("password", percent_decode(userinfo.substr(colon + 1)));
      scan.secret_ranges.emplace_back(start + colon + 1, stop);
    }
    rest = stop + 1;
  }
  const std::size_t query = text.find('?', rest);
  if (query == std::string_view::npos) return;
  std::size_t i = query + 1;
  while (i <= text.size()) {
    std::size_t end = text.find('&', i);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view pair = text.substr(i, end - i);
    const std::size_t eq = pair.find('=');
    if (!pair.empty()) {
      if (eq == std::string_view::npos) {
        scan.error = fmt::format("a URI parameter has no '=' (at character {})", i + 1);
        scan.error_at = i;
        return;
      }
      const std::string keyword = percent_decode(pair.substr(0, eq));
      if (is_secret_dsn_keyword(keyword)) scan.secret_ranges.emplace_back(i + eq + 1, end);
      scan.params.emplace_back(keyword, percent_decode(pair.substr(eq + 1)));
    }
    i = end + 1;
  }
}

}  // namespace

bool is_secret_dsn_keyword(std::string_view keyword) { return keyword == "password" || keyword == "sslpassword"; }

DsnScan scan_dsn(std::string_view dsn) {
  DsnScan scan;
  for (const std::string_view prefix : {"postgresql://", "postgres://"}) {
    if (dsn.starts_with(prefix)) {
      scan.uri = true;
      scan_uri(dsn, prefix.size(), scan);
      return scan;
    }
  }
  scan_keyword_value(dsn, scan);
  return scan;
}

}  // namespace pgoutbox::config::detail
