#include "pgoutbox/config/topic_template.h"

#include <fmt/format.h>

#include <algorithm>
#include <regex>
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

// Dynamic programming over (part, position), so any number of columns costs parts x length.
bool template_fits(const std::vector<TopicPart>& parts, std::string_view topic) {
  // reachable[i]: the parts so far can end exactly at position i.
  std::vector<char> reachable(topic.size() + 1, 0);
  reachable[0] = 1;
  for (const auto& part : parts) {
    std::vector<char> next(topic.size() + 1, 0);
    if (part.is_column) {
      bool any = false;
      for (std::size_t i = 0; i <= topic.size(); ++i) {
        if (any) next[i] = 1;  // some earlier start, then at least one byte up to i
        if (reachable[i]) any = true;
      }
    } else {
      for (std::size_t i = 0; i + part.text.size() <= topic.size(); ++i) {
        if (reachable[i] && topic.compare(i, part.text.size(), part.text) == 0) next[i + part.text.size()] = 1;
      }
    }
    reachable = std::move(next);
  }
  return reachable[topic.size()] != 0;
}

std::optional<std::string> static_topic(std::string_view topic_template) {
  std::string topic;
  try {
    for (const auto& part : parse_topic_template(topic_template)) {
      if (part.is_column) return std::nullopt;
      topic += part.text;
    }
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
  return topic;
}

std::vector<std::string> known_topics(const Config& config) {
  std::vector<std::string> topics;
  const auto add = [&topics](const std::string& topic) {
    if (std::find(topics.begin(), topics.end(), topic) == topics.end()) topics.push_back(topic);
  };
  for (const auto& table : config.tables) {
    if (auto topic = static_topic(table.topic)) add(*topic);
  }
  for (const auto& message : config.messages) {
    if (auto topic = static_topic(message.topic)) add(*topic);
  }
  if (config.poison.policy == PoisonPolicy::dead_letter) add(config.poison.dead_letter_topic);
  if (config.checkpoint.enabled) add(config.checkpoint.topic);
  return topics;
}

std::vector<std::string> reserved_topics(const Config& config) {
  return {config.checkpoint.topic, config.poison.dead_letter_topic};
}

bool topic_names_collide(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  const auto separator = [](char c) { return c == '.' || c == '_'; };
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i] && !(separator(a[i]) && separator(b[i]))) return false;
  }
  return true;
}

bool in_checkpoint_namespace(std::string_view topic) {
  return topic.size() >= kCheckpointTopicPrefix.size() &&
         topic_names_collide(topic.substr(0, kCheckpointTopicPrefix.size()), kCheckpointTopicPrefix);
}

bool is_reserved_topic(const std::vector<std::string>& reserved, std::string_view topic) {
  return in_checkpoint_namespace(topic) || std::any_of(reserved.begin(), reserved.end(), [&](const std::string& name) {
           return topic_names_collide(name, topic);
         });
}

namespace {

// Every name Kafka takes for `topic` (each '.' or '_' either), up to 2^10 of them.
std::vector<std::string> colliding_names(const std::string& topic) {
  std::vector<std::size_t> at;
  for (std::size_t i = 0; i < topic.size() && at.size() < 10; ++i) {
    if (topic[i] == '.' || topic[i] == '_') at.push_back(i);
  }
  std::vector<std::string> names;
  for (std::size_t mask = 0; mask < (std::size_t{1} << at.size()); ++mask) {
    std::string name = topic;
    for (std::size_t bit = 0; bit < at.size(); ++bit) name[at[bit]] = (mask >> bit) & 1U ? '_' : '.';
    names.push_back(std::move(name));
  }
  return names;
}

// A regular expression for `name` and its twins.
std::string twins_pattern(std::string_view name) {
  std::string pattern;
  for (const char c : name) {
    if (c == '.' || c == '_') {
      pattern += "[._]";  // and its twin: Kafka takes '.' and '_' for one
    } else {
      pattern += c;
    }
  }
  return pattern;
}

}  // namespace

std::string reserved_topic_exclusion(const Config& config) {
  std::string excluded = twins_pattern(kCheckpointTopicPrefix) + ".*";
  for (const auto& name : reserved_topics(config)) {
    if (!in_checkpoint_namespace(name)) excluded += '|' + twins_pattern(name);
  }
  return "(?!(?:" + excluded + ")$)[A-Za-z0-9._-]+";
}

std::string reserved_topic_problem(const Config& config, std::string_view topic_template,
                                   const std::string& topic_pattern) {
  std::vector<TopicPart> parts;
  try {
    parts = parse_topic_template(topic_template);
  } catch (const std::invalid_argument&) {
    return {};  // refused on its own terms
  }
  std::optional<std::regex> pattern;
  if (!topic_pattern.empty()) {
    try {
      pattern.emplace(topic_pattern);
    } catch (const std::regex_error&) {
      return {};  // refused on its own terms
    }
  }
  for (const auto& reserved : reserved_topics(config)) {
    for (const auto& topic : colliding_names(reserved)) {
      if (!template_fits(parts, topic) || (pattern && !std::regex_match(topic, *pattern))) continue;
      return fmt::format(
          "can route a row into {}, which pgoutbox reserves for its own records (checkpoint.topic and "
          "poison.dead_letter_topic{}); such a row would be poison RESERVED_TOPIC. Fix: a template that cannot "
          "produce it, or a topic_pattern that excludes it, e.g. topic_pattern: \"{}\"",
          topic, topic == reserved ? "" : fmt::format(": Kafka takes it for {}", reserved),
          reserved_topic_exclusion(config));
    }
  }
  return {};
}

}  // namespace pgoutbox::config
