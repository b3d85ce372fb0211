#pragma once

// Two YAML mistakes yaml-cpp reports far from their cause or in its own words: a tab in the
// indentation ("illegal map value", "illegal tab when looking for indentation") and a quote that
// is never closed (the rest of the file becomes the string, and the error lands wherever that
// string is judged). Found on the text before parsing, at the line where the reader must look.

#include <optional>
#include <string>
#include <string_view>

namespace pgoutbox::config::detail {

struct YamlLintProblem {
  int line = 0;    // 1-based
  int column = 0;  // 1-based
  std::string problem;
};

std::optional<YamlLintProblem> lint_yaml(std::string_view text);

}  // namespace pgoutbox::config::detail
