#pragma once

// What the table and message mappings share about row-derived text (SECURITY.md "Row values").

#include <simdjson.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace pgoutbox::outbox {

// A row-derived value as a poison reason quotes it: at most 64 bytes, every byte outside
// printable ASCII as \xNN, so that reasons (logged, and sent as dead-letter headers) stay short
// and cannot carry control characters (a NUL among them).
std::string shown(std::string_view value);

// simdjson's DOM parser sizes itself to the largest document it has parsed (about 13 bytes per
// input byte for "[0,0,…]") and keeps that capacity. The parsers are thread_local, so a parser
// that took a large document gives its memory back afterwards, and the next one pays for a new
// allocation; below this input capacity (≈13 MiB of parser) it is kept.
inline constexpr std::size_t kKeptParserCapacity = std::size_t{1} << 20;

// Releases the parser's memory when it leaves scope, if it grew above kKeptParserCapacity. Every
// element the parser returned is invalid from then on, so it is declared before them.
class ParserRelease {
 public:
  explicit ParserRelease(simdjson::dom::parser& parser) : parser_(parser) {}
  ~ParserRelease() {
    if (parser_.capacity() > kKeptParserCapacity) parser_ = simdjson::dom::parser();
  }
  ParserRelease(const ParserRelease&) = delete;
  ParserRelease& operator=(const ParserRelease&) = delete;

 private:
  simdjson::dom::parser& parser_;
};

}  // namespace pgoutbox::outbox
