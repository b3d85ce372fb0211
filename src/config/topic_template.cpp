#include "pgoutbox/config/topic_template.h"

#include <fmt/format.h>

#include <stdexcept>

namespace pgoutbox::config {
namespace {

// Kafka's legal topic characters (Topic.java, legalChars) and its length limit.
bool is_topic_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}
constexpr std::size_t kMaxTopicLength = 249;
constexpr std::size_t kMaxColumnBytes = 63;

}  // namespace

std::vector<TopicPart> parse_topic_template(std::string_view text) {
  const auto bad = [](const std::string& why) { return std::invalid_argument(why); };
  if (text.empty()) throw bad("is empty");
  std::vector<TopicPart> parts;
  std::size_t literal_length = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '$') {
      if (i + 1 >= text.size() || text[i + 1] != '{') {
        throw bad(fmt::format("has a '$' at position {} that does not start a ${{column}} reference", i + 1));
      }
      const std::size_t close = text.find('}', i + 2);
      if (close == std::string_view::npos) throw bad(fmt::format("has an unterminated ${{ at position {}", i + 1));
      const std::string_view column = text.substr(i + 2, close - i - 2);
      if (column.empty()) throw bad(fmt::format("has an empty ${{}} at position {}", i + 1));
      if (column.find_first_of("${") != std::string_view::npos) {
        throw bad(fmt::format("has a '$' or '{{' inside the reference at position {}", i + 1));
      }
      if (column.front() == ' ' || column.back() == ' ') {
        throw bad(fmt::format("has spaces around the column name at position {} (names are taken as written)", i + 1));
      }
      if (column.size() > kMaxColumnBytes)
        throw bad(fmt::format("names a column longer than {} bytes", kMaxColumnBytes));
      parts.push_back({true, std::string(column)});
      i = close + 1;
      continue;
    }
    if (!is_topic_char(text[i])) {
      throw bad(
          fmt::format("has '{}' at position {}; Kafka topics allow only letters, digits, '.', '_' and '-' besides "
                      "${{column}} references",
                      text[i], i + 1));
    }
    if (parts.empty() || parts.back().is_column) parts.push_back({false, {}});
    parts.back().text += text[i++];
    ++literal_length;
  }
  if (literal_length > kMaxTopicLength) throw bad(fmt::format("is longer than Kafka's {} characters", kMaxTopicLength));
  if (parts.size() == 1 && !parts[0].is_column && (parts[0].text == "." || parts[0].text == "..")) {
    throw bad("is '.' or '..', which Kafka does not allow");
  }
  return parts;
}

std::string topic_name_problem(std::string_view topic) {
  if (topic.empty()) return "is empty";
  if (topic.size() > kMaxTopicLength)
    return fmt::format("is {} bytes long; Kafka allows {}", topic.size(), kMaxTopicLength);
  if (topic == "." || topic == "..") return "is '.' or '..'";
  for (std::size_t i = 0; i < topic.size(); ++i) {
    if (!is_topic_char(topic[i])) {
      return fmt::format("has byte 0x{:02x} at position {}; Kafka allows only letters, digits, '.', '_' and '-'",
                         static_cast<unsigned char>(topic[i]), i + 1);
    }
  }
  return {};
}

}  // namespace pgoutbox::config
