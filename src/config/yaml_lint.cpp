#include "yaml_lint.h"

#include <cctype>
#include <vector>

#include <fmt/format.h>

namespace pgoutbox::config::detail {
namespace {

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) {
      if (start < text.size()) lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// "key:" or "key: value" at the start of a line (after indentation and an optional "- "): what
// a mapping line looks like, and what a runaway quoted string swallows first.
bool looks_like_key_line(std::string_view line) {
  std::size_t i = line.find_first_not_of(" \t");
  if (i == std::string_view::npos) return false;
  if (line.substr(i, 2) == "- ") i += 2;
  const std::size_t start = i;
  while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) != 0 || line[i] == '_' ||
                             line[i] == '.' || line[i] == '-')) {
    ++i;
  }
  return i > start && i < line.size() && line[i] == ':' && (i + 1 == line.size() || line[i + 1] == ' ');
}

// Where the value of a "key: value" or "- value" line starts, when it is quoted; npos otherwise.
std::size_t quoted_value_start(std::string_view line) {
  std::size_t i = line.find_first_not_of(' ');
  if (i == std::string_view::npos || line[i] == '#') return std::string_view::npos;
  if (line.substr(i, 2) == "- ") {
    i = line.find_first_not_of(' ', i + 2);
  } else {
    const std::size_t colon = line.find(": ", i);
    if (colon == std::string_view::npos) return std::string_view::npos;
    i = line.find_first_not_of(' ', colon + 2);
  }
  if (i == std::string_view::npos || (line[i] != '"' && line[i] != '\'')) return std::string_view::npos;
  return i;
}

// The closing quote's position in `line` from `from`, or npos (double quotes honour '\',
// single quotes are doubled to escape).
std::size_t closing_quote(std::string_view line, std::size_t from, char quote) {
  for (std::size_t i = from; i < line.size(); ++i) {
    if (quote == '"' && line[i] == '\\') {
      ++i;
      continue;
    }
    if (line[i] != quote) continue;
    if (quote == '\'' && i + 1 < line.size() && line[i + 1] == '\'') {
      ++i;
      continue;
    }
    return i;
  }
  return std::string_view::npos;
}

}  // namespace

std::optional<YamlLintProblem> lint_yaml(std::string_view text) {
  const auto lines = split_lines(text);
  for (std::size_t n = 0; n < lines.size(); ++n) {
    const auto line = lines[n];
    const std::size_t indent_end = line.find_first_not_of(" \t");
    const std::size_t tab = line.substr(0, indent_end).find('\t');
    if (tab != std::string_view::npos && indent_end != std::string_view::npos) {
      return YamlLintProblem{static_cast<int>(n + 1), static_cast<int>(tab + 1),
                             "tabs are not allowed for indentation; indent with spaces"};
    }
  }
  for (std::size_t n = 0; n < lines.size(); ++n) {
    const std::size_t open = quoted_value_start(lines[n]);
    if (open == std::string_view::npos) continue;
    const char quote = lines[n][open];
    if (closing_quote(lines[n], open + 1, quote) != std::string_view::npos) continue;
    // A quoted string may go on over lines; one that reaches the end of the file or a line that
    // looks like the next key was never closed.
    std::size_t m = n + 1;
    for (; m < lines.size(); ++m) {
      if (closing_quote(lines[m], 0, quote) != std::string_view::npos) break;
      if (looks_like_key_line(lines[m])) {
        m = lines.size();
        break;
      }
    }
    if (m < lines.size()) {
      n = m;
      continue;
    }
    return YamlLintProblem{static_cast<int>(n + 1), static_cast<int>(open + 1),
                           fmt::format("the quote ({}) opened here is not closed; close it on this line", quote)};
  }
  return std::nullopt;
}

}  // namespace pgoutbox::config::detail
