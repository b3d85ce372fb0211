#pragma once

// An SQL predicate written by an operator (tables[].backfill.where, republish --where) is pasted
// into SELECT ... FROM <table> WHERE (<predicate>): it must stay one expression inside those
// parentheses (SECURITY.md "Backfill and republish predicates").

#include <string>
#include <string_view>

namespace pgoutbox::config {

// Why `predicate` could reach past WHERE (...), or an empty string when it cannot. Lexed with
// PostgreSQL's rules (scan.l, with standard_conforming_strings on, which the reader's session
// sets): string constants '...' with '' inside, E'...' with backslash escapes, dollar quotes
// $tag$...$tag$, quoted identifiers "..."; outside them, a ';', a comment (-- or /*), a ')'
// that closes the WHERE's parenthesis, a '(' left open, a parameter ($1), a set operation
// (UNION, INTERSECT, EXCEPT) outside every parenthesis, an unterminated literal, a NUL byte and
// a non-ASCII byte inside E'...' (where a client encoding's second byte could be a backslash)
// are refused. PostgreSQL itself then checks that the predicate is a boolean expression over
// the table (relay::RowReader::explain_error).
std::string predicate_problem(std::string_view predicate);

}  // namespace pgoutbox::config
