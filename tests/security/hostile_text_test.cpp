// Hostile text without services (issue 25 items 8 and 9; SECURITY.md):
//   - an operator's predicate cannot reach past WHERE (...): a ';', a comment, a ')' closing the
//     parenthesis or a set operation outside every parenthesis is refused, while the same
//     characters inside a literal are not;
//   - a predicate with any of them is a configuration error at load;
//   - a text log line escapes a raw byte 0x80–0x9F (a C1 control to an 8-bit terminal), not only
//     the same control written as UTF-8;
//   - a message outbox's INVALID_TOPIC reason quotes the topic escaped, as a table's does;
//   - `check` warns about sslmode require and verify-ca, about
//     ssl.endpoint.identification.algorithm=none and about plaintext to a broker off loopback.
#include <gtest/gtest.h>
#include <spdlog/details/log_msg.h>

#include <algorithm>
#include <string>
#include <variant>
#include <vector>

#include "pgoutbox/config/loader.h"
#include "pgoutbox/config/predicate.h"
#include "pgoutbox/diagnostics/preflight.h"
#include "pgoutbox/logging/logging.h"
#include "pgoutbox/outbox/envelope.h"

namespace pgoutbox::test {
namespace {

TEST(Predicate, WhatCouldReachPastTheParenthesisIsRefused) {
  for (const auto& [predicate, says] : std::vector<std::pair<std::string, std::string>>{
           {"true) UNION SELECT * FROM pg_authid --", "')' at byte 5"},
           {"1=1; DROP TABLE x", "';' at byte 4"},
           {"status = 'NEW' /*", "comment (/*)"},
           {"true -- ) UNION SELECT 1", "comment (--)"},
           {"true) OR (true", "')' at byte 5"},
           {"(true", "leaves 1 parenthesis open"},
           {"true UNION SELECT 1", "UNION at byte 6 outside every parenthesis"},
           {"true intersect select 1", "intersect at byte 6"},
           {"(SELECT true) EXCEPT (SELECT false)", "EXCEPT at byte 15"},
           {"id = $1", "parameter at byte 6"},
           {"status = 'NEW", "string constant at byte 10 that is never closed"},
           {"status = E'NEW\\') OR (1=1", "string constant at byte 10 that is never closed"},
           {"\"status = 'x'", "quoted identifier at byte 1"},
           {"status = $q$NEW", "dollar-quoted string at byte 10"},
           {"", "is empty"},
           {"  \n", "is empty"},
           {std::string("true\0) --", 9), "NUL byte"},
           // SJIS 0x95 0x5C is one character; read byte by byte, its 0x5C would escape the quote.
           {"aggregateid = E'\x95\\') UNION SELECT 1 --'", "non-ASCII byte in the E'...' string at byte 15"},
           // PostgreSQL reads a1e'…' as the identifier a1e and a plain string: the backslash ends
           // nothing, the ')' after the string closes WHERE's parenthesis.
           {"a1e'\\') UNION SELECT 1 --'", "')' at byte 7"},
       }) {
    EXPECT_NE(config::predicate_problem(predicate).find(says), std::string::npos)
        << predicate << " → " << config::predicate_problem(predicate);
  }
}

TEST(Predicate, TheSameCharactersInsideLiteralsAreAccepted) {
  for (const std::string predicate : {
           "status = 'NEW'",
           "aggregateid = 'a); DROP TABLE x; --'",
           "aggregateid = 'it''s ) ;'",
           "aggregateid = E'\\') ; --'",
           "aggregateid = e'x\\\\'",
           "aggregateid = $$ ) ; -- $$",
           "aggregateid = $tag$ $$ ) ;$tag$",
           "\"Status; ) --\" = 'x'",
           "a$b$ = 1 AND (x = 'y' OR (z IS NULL))",
           "id IN (SELECT id FROM t UNION SELECT 2)",
           "payload->>'note' LIKE '%(%'",
           "1e5 > 0.5e-3 AND .5 < 1",
           "status = U&'d\\0061t)a'",
       }) {
    EXPECT_EQ(config::predicate_problem(predicate), "") << predicate;
  }
}

TEST(Predicate, AnUnsafeBackfillPredicateIsAConfigurationError) {
  const std::string yaml =
      "postgres:\n  dsn: \"host=127.0.0.1 dbname=app\"\n  slot: s\n  publication: p\nkafka:\n  brokers: "
      "127.0.0.1:9092\ntables:\n  - table: public.outbox\n    backfill:\n      where: \"true) UNION SELECT 1 --\"\n";
  try {
    config::load_string(yaml, "outbox.yaml", config::Environment{});
    FAIL() << "loaded";
  } catch (const config::ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tables[0].backfill.where"), std::string::npos) << what;
    EXPECT_NE(what.find("closes the parenthesis of WHERE"), std::string::npos) << what;
  }
  const std::string fine =
      yaml.substr(0, yaml.find("where:")) + "where: \"aggregateid = ')'\"\n      statement_timeout: 2s\n";
  const auto cfg = config::load_string(fine, "outbox.yaml", config::Environment{});
  EXPECT_EQ(cfg.tables[0].backfill.where, "aggregateid = ')'");
  EXPECT_EQ(cfg.tables[0].backfill.statement_timeout, std::chrono::seconds(2));
}

std::string text_line(const std::string& message) {
  const auto formatter = logging::make_formatter(logging::Format::text);
  spdlog::details::log_msg msg(spdlog::source_loc{}, "", spdlog::level::warn, message);
  spdlog::memory_buf_t out;
  formatter->format(msg, out);
  return {out.data(), out.size()};
}

TEST(TextLogs, RawC1BytesAreEscapedLikeTheirUtf8Form) {
  // 0x9B is CSI to a terminal in an 8-bit mode, as U+009B is to a UTF-8 one.
  const auto line = text_line(
      "id \x9b"
      "2J and \xc2\x9b"
      "31m and \x85 and \xc2");
  for (unsigned c = 0x80; c <= 0x9F; ++c) {
    EXPECT_EQ(line.find(static_cast<char>(c)), std::string::npos) << "raw byte " << c << " in " << line;
  }
  EXPECT_NE(line.find("id \\x9b2J and \\u009b31m and \\x85 and \\xc2"), std::string::npos) << line;
  // What is well-formed UTF-8 is kept, continuation bytes 0x80–0x9F included.
  const auto text = text_line("caf\xc3\xa9 \xe2\x80\x9cquoted\xe2\x80\x9d \xc2\xa0");
  EXPECT_NE(text.find("caf\xc3\xa9 \xe2\x80\x9cquoted\xe2\x80\x9d \xc2\xa0"), std::string::npos) << text;
}

TEST(MessageOutbox, AnInvalidTopicIsQuotedEscapedInTheReason) {
  config::MessageConfig m;
  m.prefix = "outbox";
  const outbox::MessageMapping mapping({m}, false);
  const std::string envelope = R"({"id":"1","aggregatetype":"x\u001b[2J\nforged line\u009b","payload":{}})";
  const auto built = mapping.build(0, envelope, outbox::TxnContext{Lsn{1}, 0, 1});
  ASSERT_TRUE(std::holds_alternative<outbox::Poison>(built));
  const auto& poison = std::get<outbox::Poison>(built);
  EXPECT_EQ(poison.code, "INVALID_TOPIC");
  EXPECT_TRUE(std::none_of(poison.reason.begin(), poison.reason.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u >= 0x7f;
  })) << poison.reason;
  EXPECT_NE(poison.reason.find(R"(the topic "outbox.event.x\x1b[2J\x0aforged line\xc2\x9b")"), std::string::npos)
      << poison.reason;
}

config::Config transport(const std::string& dsn, const std::string& brokers,
                         std::map<std::string, std::string> properties = {}) {
  config::Config c;
  c.postgres.dsn = dsn;
  c.kafka.brokers = brokers;
  c.kafka.properties = std::move(properties);
  return c;
}

std::string warnings_of(const config::Config& c) {
  std::string out;
  for (const auto& f : diagnostics::check_transport_security(c)) {
    EXPECT_EQ(f.severity, diagnostics::Severity::warning) << f.message;
    out += f.subject + ": " + f.message + " Fix: " + f.fix + "\n";
  }
  return out;
}

TEST(TransportChecks, PostgresTlsThatDoesNotVerifyTheHostIsAWarning) {
  const std::string secure = "host=db.example.com dbname=app sslrootcert=/ca.pem sslmode=verify-full";
  EXPECT_EQ(warnings_of(transport(secure, "127.0.0.1:9092")), "");
  for (const std::string mode : {"require", "verify-ca"}) {
    const auto text = warnings_of(transport("host=db.example.com dbname=app sslmode=" + mode, "127.0.0.1:9092"));
    EXPECT_NE(text.find("postgres tls: sslmode is " + mode), std::string::npos) << text;
    EXPECT_NE(text.find("Fix: set sslmode=verify-full (with sslrootcert)"), std::string::npos) << text;
  }
  // The fix for prefer is verify-full, not "at least require".
  const auto prefer = warnings_of(transport("host=db.example.com dbname=app", "127.0.0.1:9092"));
  EXPECT_NE(prefer.find("sslmode is prefer"), std::string::npos) << prefer;
  EXPECT_EQ(prefer.find("require"), std::string::npos) << prefer;
}

TEST(TransportChecks, KafkaWithoutHostNameVerificationOrPlaintextOffLoopbackIsAWarning) {
  const std::string db = "host=/run/postgresql dbname=app";
  const auto none = warnings_of(transport(
      db, "kafka.example.com:9093", {{"security.protocol", "SSL"}, {"ssl.endpoint.identification.algorithm", "none"}}));
  EXPECT_NE(none.find("kafka tls: ssl.endpoint.identification.algorithm is none"), std::string::npos) << none;
  EXPECT_NE(none.find("Fix: set kafka.properties.ssl.endpoint.identification.algorithm: https"), std::string::npos)
      << none;
  EXPECT_EQ(warnings_of(transport(db, "kafka.example.com:9093", {{"security.protocol", "SSL"}})), "");

  for (const std::string brokers :
       {"kafka.example.com:9092", "127.0.0.1:9092,10.0.0.7:9092", "[2001:db8::1]:9092", "PLAINTEXT://kafka:9092"}) {
    const auto text = warnings_of(transport(db, brokers));
    EXPECT_NE(text.find("kafka tls: security.protocol is plaintext and broker"), std::string::npos) << brokers << text;
    EXPECT_NE(text.find("Fix: set kafka.properties.security.protocol: SSL (or SASL_SSL)"), std::string::npos) << text;
  }
  const auto sasl = warnings_of(transport(db, "kafka.example.com:9092", {{"security.protocol", "SASL_PLAINTEXT"}}));
  EXPECT_NE(sasl.find("security.protocol is sasl_plaintext and broker kafka.example.com"), std::string::npos) << sasl;
  EXPECT_NE(sasl.find("Fix: set kafka.properties.security.protocol: SASL_SSL"), std::string::npos) << sasl;
  for (const std::string brokers : {"127.0.0.1:9092", "localhost:9092,127.0.0.2:9093", "[::1]:9092"}) {
    EXPECT_EQ(warnings_of(transport(db, brokers)), "") << brokers;
  }
}

}  // namespace
}  // namespace pgoutbox::test
