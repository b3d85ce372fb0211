#pragma once

// A scanner for libpq connection strings, in both forms libpq accepts (libpq-connect "Connection
// Strings"): keyword=value pairs, and postgresql:// URIs. It finds the secret values so they can
// be redacted and tells the loader whether the DSN carries a password. It never reports the text
// itself: a typo in a DSN can put a password where a keyword should be.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pgoutbox::config::detail {

struct DsnScan {
  bool uri = false;
  std::vector<std::pair<std::string, std::string>> params;         // keywords and unescaped values
  std::vector<std::pair<std::size_t, std::size_t>> secret_ranges;  // [begin, end) of secret values in the text
  std::optional<std::string> error;                                // what is malformed, without any of the text
  std::size_t error_at = 0;                                        // where the scan stopped understanding the text
};

DsnScan scan_dsn(std::string_view dsn);

// password, and sslpassword (the passphrase of the client key).
bool is_secret_dsn_keyword(std::string_view keyword);

}  // namespace pgoutbox::config::detail
