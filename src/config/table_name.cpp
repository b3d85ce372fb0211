#include "table_name.h"

#include <fmt/format.h>

#include <vector>

#include "fields.h"
#include "values.h"

namespace pgoutbox::config::detail {
namespace {

bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}
bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9') || c == '$'; }
bool is_space(char c) { return c == ' ' || c == '\t'; }

bool needs_quotes(const std::string& ident) {
  if (ident.empty() || !(is_ident_start(ident[0]) && static_cast<unsigned char>(ident[0]) < 0x80)) return true;
  for (char c : ident) {
    if (!is_ident_char(c) || (c >= 'A' && c <= 'Z') || static_cast<unsigned char>(c) >= 0x80) return true;
  }
  return false;
}

std::string quote_ident(const std::string& ident) {
  if (!needs_quotes(ident)) return ident;
  std::string out = "\"";
  for (char c : ident) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

QualifiedName parse_table_name(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return Invalid(
        fmt::format("{}; write table or schema.table, with \"double quotes\" around names that keep case or hold "
                    "other characters (got {})",
                    why, quote(text)));
  };
  std::vector<std::string> parts;
  std::size_t i = 0;
  for (;;) {
    while (i < text.size() && is_space(text[i])) ++i;
    if (i == text.size()) throw bad(parts.empty() ? "is empty" : "ends with a dot");
    std::string ident;
    if (text[i] == '"') {
      ++i;
      for (;;) {
        if (i == text.size()) throw bad("has an unterminated quoted identifier");
        if (text[i] == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            ident += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        ident += text[i++];
      }
      if (ident.empty()) throw bad("has an empty quoted identifier \"\"");
    } else {
      if (!is_ident_start(text[i])) throw bad(fmt::format("has '{}' where a name should start", text[i]));
      while (i < text.size() && is_ident_char(text[i])) {
        const char c = text[i++];
        ident += (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c;  // ASCII only, as downcase_identifier does for UTF-8
      }
    }
    if (ident.size() > kMaxNameBytes)
      throw bad(fmt::format("has a name longer than {} bytes, which Postgres truncates", kMaxNameBytes));
    parts.push_back(std::move(ident));
    while (i < text.size() && is_space(text[i])) ++i;
    if (i == text.size()) break;
    if (text[i] != '.') throw bad(fmt::format("has '{}' after a name", text[i]));
    ++i;
  }
  if (parts.size() > 2) throw bad("has more than two parts (a database name is not allowed)");
  if (parts.size() == 1) return {"public", parts[0]};
  return {parts[0], parts[1]};
}

std::string format_table_name(const std::string& schema, const std::string& name) {
  return quote_ident(schema) + "." + quote_ident(name);
}

}  // namespace pgoutbox::config::detail
