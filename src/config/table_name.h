#pragma once

// Table names follow Postgres's identifier rules (scan.l, SplitIdentifierString): unquoted
// parts fold to lower case, double-quoted parts keep case and may hold dots and "" escapes, and
// an unqualified name lives in schema public.

#include <string>
#include <string_view>

namespace pgoutbox::config::detail {

struct QualifiedName {
  std::string schema;
  std::string name;
};

// Throws Invalid.
QualifiedName parse_table_name(std::string_view text);

// The shortest text parse_table_name reads back to the same name.
std::string format_table_name(const std::string& schema, const std::string& name);

}  // namespace pgoutbox::config::detail
