// The lexical check of an operator's SQL predicate (predicate.h). It follows PostgreSQL's lexer
// (src/backend/parser/scan.l) only as far as needed to know, for every byte, whether it is inside
// a literal, a quoted identifier or neither: where this scanner and PostgreSQL's could disagree
// (a number run into a letter), PostgreSQL refuses the text, so a predicate this check accepts
// has the parentheses, semicolons and comments PostgreSQL sees.
#include "pgoutbox/config/predicate.h"

#include <fmt/format.h>

#include <cctype>

namespace pgoutbox::config {
namespace {

bool is_ident_start(char c) {
  const auto u = static_cast<unsigned char>(c);
  return std::isalpha(u) != 0 || c == '_' || u >= 0x80;
}

// Identifiers may go on with digits and '$' (scan.l ident_cont); a dollar-quote tag may not
// contain '$' (dolq_cont).
bool is_ident_cont(char c) { return is_ident_start(c) || std::isdigit(static_cast<unsigned char>(c)) != 0 || c == '$'; }
bool is_tag_cont(char c) { return is_ident_start(c) || std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}

  std::string problem() {
    if (text_.find_first_not_of(" \t\n\r\f\v") == std::string_view::npos) return "is empty";
    if (text_.find('\0') != std::string_view::npos) return "contains a NUL byte";
    int depth = 0;
    while (i_ < text_.size()) {
      const char c = text_[i_];
      const std::size_t at = i_ + 1;  // 1-based, as an operator counts
      const char next = i_ + 1 < text_.size() ? text_[i_ + 1] : '\0';
      if ((c == 'e' || c == 'E') && next == '\'') {
        ++i_;
        const std::size_t start = i_;
        if (!skip_quoted('\'', true)) return fmt::format("has a string constant at byte {} that is never closed", at);
        // In a client encoding such as SJIS or BIG5 a character's second byte may be 0x5C, which
        // this scanner would read as a backslash and PostgreSQL, after conversion, would not.
        for (std::size_t k = start; k < i_; ++k) {
          if (static_cast<unsigned char>(text_[k]) >= 0x80) {
            return fmt::format(
                "has a non-ASCII byte in the E'...' string at byte {}; write such text in a plain "
                "'...' string",
                at);
          }
        }
      } else if (is_ident_start(c)) {
        const std::size_t start = i_;
        while (i_ < text_.size() && is_ident_cont(text_[i_])) ++i_;
        const auto word = text_.substr(start, i_ - start);
        for (const std::string_view set_operation : {"union", "intersect", "except"}) {
          if (depth == 0 && equals_ignoring_case(word, set_operation)) {
            return fmt::format(
                "has {} at byte {} outside every parenthesis: a predicate is one expression, not a "
                "set operation",
                word, at);
          }
        }
      } else if (is_digit(c) || (c == '.' && is_digit(next))) {
        skip_number();
      } else if (c == '\'') {
        if (!skip_quoted('\'', false)) return fmt::format("has a string constant at byte {} that is never closed", at);
      } else if (c == '"') {
        if (!skip_quoted('"', false)) return fmt::format("has a quoted identifier at byte {} that is never closed", at);
      } else if (c == '$' && is_digit(next)) {
        return fmt::format("has a parameter at byte {}; write the value itself", at);
      } else if (c == '$') {
        if (auto problem = skip_dollar_quoted(at); !problem.empty()) return problem;
      } else if ((c == '-' && next == '-') || (c == '/' && next == '*')) {
        return fmt::format("has a comment ({}{}) at byte {}: it would hide the rest of the query", c, next, at);
      } else if (c == ';') {
        return fmt::format("has a ';' at byte {}: a predicate is one expression, not another statement", at);
      } else if (c == '(') {
        ++depth;
        ++i_;
      } else if (c == ')') {
        if (depth == 0) {
          return fmt::format("has a ')' at byte {} that closes the parenthesis of WHERE (...) around it", at);
        }
        --depth;
        ++i_;
      } else {
        ++i_;
      }
    }
    if (depth > 0) return fmt::format("leaves {} parenthes{} open", depth, depth == 1 ? "is" : "es");
    return {};
  }

 private:
  // From the opening quote at i_ to past the closing one; a doubled quote is one character of
  // the literal, and in an E'...' string a backslash escapes the character after it.
  bool skip_quoted(char quote, bool backslash_escapes) {
    ++i_;
    while (i_ < text_.size()) {
      const char c = text_[i_];
      if (backslash_escapes && c == '\\') {
        i_ += 2;
      } else if (c == quote) {
        if (i_ + 1 < text_.size() && text_[i_ + 1] == quote) {
          i_ += 2;
        } else {
          ++i_;
          return true;
        }
      } else {
        ++i_;
      }
    }
    return false;
  }

  // Digits, a fraction and an exponent only when digits follow it: PostgreSQL 14 and older read
  // 1e'x' as the number 1 and the string E'x' (realfail1), PostgreSQL 15 and later refuse it.
  void skip_number() {
    while (i_ < text_.size() && (is_digit(text_[i_]) || text_[i_] == '.')) ++i_;
    if (i_ < text_.size() && (text_[i_] == 'e' || text_[i_] == 'E')) {
      std::size_t j = i_ + 1;
      if (j < text_.size() && (text_[j] == '+' || text_[j] == '-')) ++j;
      if (j < text_.size() && is_digit(text_[j])) {
        i_ = j;
        while (i_ < text_.size() && is_digit(text_[i_])) ++i_;
      }
    }
  }

  // $tag$...$tag$ (tag empty or an identifier without '$'); a '$' that starts no delimiter is
  // left to PostgreSQL, which refuses it.
  std::string skip_dollar_quoted(std::size_t at) {
    std::size_t j = i_ + 1;
    if (j < text_.size() && is_ident_start(text_[j])) {
      while (j < text_.size() && is_tag_cont(text_[j])) ++j;
    }
    if (j >= text_.size() || text_[j] != '$') {
      ++i_;
      return {};
    }
    const auto delimiter = text_.substr(i_, j + 1 - i_);
    const auto end = text_.find(delimiter, j + 1);
    if (end == std::string_view::npos)
      return fmt::format("has a dollar-quoted string at byte {} that is never closed", at);
    i_ = end + delimiter.size();
    return {};
  }

  std::string_view text_;
  std::size_t i_ = 0;
};

}  // namespace

std::string predicate_problem(std::string_view predicate) { return Scanner(predicate).problem(); }

}  // namespace pgoutbox::config
