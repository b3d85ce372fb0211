#pragma once

// A JSON string literal for a few text fields of `pgoutbox status --json` (RFC 8259 §7):
// quotes, backslashes and control characters escaped; other bytes (UTF-8) kept.

#include <string>
#include <string_view>

namespace pgoutbox::diagnostics {

std::string json_string(std::string_view text);

}  // namespace pgoutbox::diagnostics
