// The log formatter: every JSON line parses back (simdjson) with the message and the event's
// fields intact, whatever the message holds; text lines carry the same facts; traceparent.
#include <gtest/gtest.h>
#include <simdjson.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>
#include <string>
#include <vector>

#include "pgoutbox/logging/logging.h"

namespace pgoutbox::logging {
namespace {

// Routes the default logger into a string for the test's lifetime.
class CapturedLog {
 public:
  explicit CapturedLog(Format format) : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    sink->set_formatter(make_formatter(format));
    auto logger = std::make_shared<spdlog::logger>("captured", sink);
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(logger);
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }

  std::vector<std::string> lines() const {
    std::vector<std::string> result;
    std::istringstream in(out_.str());
    for (std::string line; std::getline(in, line);) result.push_back(line);
    return result;
  }
  std::string text() const { return out_.str(); }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream out_;
};

struct Parsed {
  std::map<std::string, std::string> members;
};

// Parses one line as a JSON object of strings; fails the test when it is not one.
Parsed parse_line(const std::string& line) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  const auto error = parser.parse(line).get(doc);
  EXPECT_EQ(error, simdjson::SUCCESS) << "not JSON: " << line;
  Parsed parsed;
  if (error) return parsed;
  simdjson::dom::object object;
  EXPECT_EQ(doc.get(object), simdjson::SUCCESS) << line;
  for (auto [key, value] : object) {
    std::string_view text;
    EXPECT_EQ(value.get(text), simdjson::SUCCESS) << "member " << key << " is not a string: " << line;
    parsed.members[std::string(key)] = std::string(text);
  }
  return parsed;
}

TEST(JsonLog, EveryLineIsOneObjectWithTimestampLevelAndMessage) {
  CapturedLog log(Format::json);
  spdlog::info("plain message");
  spdlog::warn("a warning with {} argument", 1);
  const auto lines = log.lines();
  ASSERT_EQ(lines.size(), 2U) << log.text();
  const auto first = parse_line(lines[0]);
  EXPECT_EQ(first.members.at("message"), "plain message");
  EXPECT_EQ(first.members.at("level"), "info");
  const auto& ts = first.members.at("timestamp");
  // 2026-11-29T10:41:25.123Z
  ASSERT_EQ(ts.size(), 24U) << ts;
  EXPECT_EQ(ts[4], '-');
  EXPECT_EQ(ts[10], 'T');
  EXPECT_EQ(ts[19], '.');
  EXPECT_EQ(ts.back(), 'Z');
  EXPECT_EQ(parse_line(lines[1]).members.at("level"), "warn");
  EXPECT_EQ(parse_line(lines[1]).members.at("message"), "a warning with 1 argument");
  EXPECT_EQ(first.members.count("event_id"), 0U) << "a line about no event has no event fields";
}

TEST(JsonLog, HostileMessagesStayOneValidLine) {
  CapturedLog log(Format::json);
  std::string control;
  for (int c = 0; c < 0x20; ++c) control.push_back(static_cast<char>(c));
  control.push_back('\x7f');
  const std::vector<std::string> messages = {
      R"(quotes " and \ backslash \" \\)",
      "new\nline\r\nand\ttab",
      control,
      "utf-8 kept: grüße 注文 🚀",
      std::string("bad utf-8: \xff\xfe \xc3 \xe2\x82 \xed\xa0\x80 \xc0\xaf end"),
      R"({"looks":"like json"})",
      "",
  };
  for (const auto& m : messages) spdlog::error("{}", m);
  const auto lines = log.lines();
  ASSERT_EQ(lines.size(), messages.size()) << "a message broke its line: " << log.text();
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const auto parsed = parse_line(lines[i]);
    if (i == 4) {
      EXPECT_EQ(parsed.members.at("message").find('\xff'), std::string::npos);
      EXPECT_NE(parsed.members.at("message").find("\xEF\xBF\xBD"), std::string::npos) << "invalid bytes become U+FFFD";
      EXPECT_NE(parsed.members.at("message").find(" end"), std::string::npos);
      continue;
    }
    EXPECT_EQ(parsed.members.at("message"), messages[i]) << "line " << i << " did not round-trip: " << lines[i];
  }
}

TEST(JsonLog, EventLinesCarryTheEventsIdentity) {
  CapturedLog log(Format::json);
  event(spdlog::level::err,
        EventFields{.event_id = "7f1c\"quoted\"",
                    .aggregate_id = "order-42\n",
                    .topic = "outbox.event.Order",
                    .trace_id = "4bf92f3577b34da6a3ce929d0e0e4736",
                    .lsn = Lsn{0x16B3748}},
        "dead-lettered after 5 attempts");
  event(spdlog::level::info, EventFields{.event_id = "only-id"}, "partial");
  spdlog::info("after the event");
  const auto lines = log.lines();
  ASSERT_EQ(lines.size(), 3U) << log.text();
  const auto full = parse_line(lines[0]).members;
  EXPECT_EQ(full.at("level"), "error");
  EXPECT_EQ(full.at("message"), "dead-lettered after 5 attempts");
  EXPECT_EQ(full.at("event_id"), "7f1c\"quoted\"");
  EXPECT_EQ(full.at("aggregate_id"), "order-42\n");
  EXPECT_EQ(full.at("topic"), "outbox.event.Order");
  EXPECT_EQ(full.at("lsn"), "0/16B3748");
  EXPECT_EQ(full.at("trace_id"), "4bf92f3577b34da6a3ce929d0e0e4736");
  const auto partial = parse_line(lines[1]).members;
  EXPECT_EQ(partial.at("event_id"), "only-id");
  EXPECT_EQ(partial.count("topic"), 0U) << "empty fields are left out";
  EXPECT_EQ(partial.count("lsn"), 0U) << "LSN 0 is left out";
  EXPECT_EQ(parse_line(lines[2]).members.count("event_id"), 0U) << "fields leaked into a later line";
}

TEST(JsonLog, LevelFilteringStillApplies) {
  CapturedLog log(Format::json);
  spdlog::default_logger()->set_level(spdlog::level::warn);
  spdlog::info("hidden");
  event(spdlog::level::debug, EventFields{.event_id = "x"}, "hidden too");
  spdlog::error("shown");
  const auto lines = log.lines();
  ASSERT_EQ(lines.size(), 1U) << log.text();
  EXPECT_EQ(parse_line(lines[0]).members.at("message"), "shown");
}

TEST(TextLog, MessageThenFieldsAsKeyValue) {
  CapturedLog log(Format::text);
  event(spdlog::level::warn,
        EventFields{.event_id = "e1", .aggregate_id = "has space", .topic = "t", .lsn = Lsn{(1ULL << 32) | 0x10}},
        "retrying");
  const auto lines = log.lines();
  ASSERT_EQ(lines.size(), 1U);
  const auto& line = lines[0];
  EXPECT_EQ(line.find('{'), std::string::npos) << line;
  EXPECT_NE(line.find("Z warn retrying event_id=e1 aggregate_id=\"has space\" topic=t lsn=1/10"), std::string::npos)
      << line;
}

TEST(Format, AutoIsJsonUnlessATerminal) {
  EXPECT_EQ(parse_format("auto", false), Format::json);
  EXPECT_EQ(parse_format("auto", true), Format::text);
  EXPECT_EQ(parse_format("json", true), Format::json);
  EXPECT_EQ(parse_format("text", false), Format::text);
  EXPECT_THROW(parse_format("xml", false), std::invalid_argument);
  EXPECT_THROW(setup("auto", "loud"), std::invalid_argument);
}

TEST(Traceparent, TheTraceIdOfAValidHeader) {
  EXPECT_EQ(trace_id_from_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(trace_id_from_traceparent(" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00 "),
            "4bf92f3577b34da6a3ce929d0e0e4736");
  // A future version may append fields.
  EXPECT_EQ(trace_id_from_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"),
            "4bf92f3577b34da6a3ce929d0e0e4736");
}

TEST(Traceparent, AnythingElseGivesNoTraceId) {
  for (const std::string_view bad : {
           "", "garbage",
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",    // upper case
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",    // version ff
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",    // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",    // zero parent id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",  // version 00 is exact
           "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",    // separators
           "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",     // short trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",    // not hex
       }) {
    EXPECT_TRUE(trace_id_from_traceparent(bad).empty()) << bad;
  }
}

TEST(JsonEscape, ControlCharactersUseUnicodeEscapes) {
  std::string out;
  append_json_escaped(out, std::string_view("a\x01"
                                            "b\x1f"
                                            "c",
                                            5));
  EXPECT_EQ(out, "a\\u0001b\\u001fc");
}

// C1 controls (U+0080-U+009F) are escaped as C0 ones are: a terminal takes U+009B for CSI, so a
// row's id could otherwise move the cursor or rewrite what an operator reads (issue 38 item 5).
TEST(JsonEscape, C1ControlsUseUnicodeEscapes) {
  std::string out;
  append_json_escaped(out,
                      "a\xc2\x80"
                      "b\xc2\x9b"
                      "[2Jc\xc2\x9f"
                      "d\xc2\xa0"
                      "e");
  EXPECT_EQ(out,
            "a\\u0080b\\u009b[2Jc\\u009fd\xc2\xa0"
            "e");  // U+00A0 is no control: kept
}

// The text format writes a field raw only when it is plain ASCII: any other byte (a C1 control, a
// raw 0x9B from a SQL_ASCII database) gets the quoted, escaped form.
TEST(TextLog, FieldsWithControlsOrNonAsciiBytesAreQuotedAndEscaped) {
  CapturedLog log(Format::text);
  event(spdlog::level::warn,
        EventFields{.event_id = "e\xc2\x9b"
                                "1",
                    .aggregate_id = "raw\x9b"
                                    "[31m",
                    .topic = "t"},
        "poison");
  const auto lines = log.lines();
  ASSERT_EQ(lines.size(), 1U);
  const auto& line = lines[0];
  EXPECT_NE(line.find("event_id=\"e\\u009b1\""), std::string::npos) << line;
  EXPECT_NE(line.find("aggregate_id=\"raw\xef\xbf\xbd[31m\""), std::string::npos) << line;
  EXPECT_EQ(line.find('\x9b'), std::string::npos) << line;
}

}  // namespace
}  // namespace pgoutbox::logging
