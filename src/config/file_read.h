#pragma once

// Reads a whole file for the loader (the configuration itself, secret files), reporting what
// failed so that each caller words its own error.

#include <cstddef>
#include <limits>
#include <string>

namespace pgoutbox::config::detail {

struct FileContent {
  enum class Failure { none, open, read, too_large };
  std::string text;
  Failure failure = Failure::none;
  int error = 0;  // errno for open and read
};

FileContent read_file(const std::string& path, std::size_t max_bytes = std::numeric_limits<std::size_t>::max());

}  // namespace pgoutbox::config::detail
