#pragma once

// Reading a file an operator names on the command line, with the same bounds as the
// configuration file (SECURITY.md "Local users of the host"): only a regular file, and at most
// `max_bytes` of it, so that /dev/zero or a FIFO is refused at once instead of exhausting memory
// or blocking forever.

#include <cstddef>
#include <stdexcept>
#include <string>

namespace pgoutbox::config {

// The whole of `path`; throws std::runtime_error saying why it cannot be read, without the path
// ("is not a regular file (a FIFO)", "is larger than 1024 KiB; is it the right file?",
// "cannot open: No such file or directory").
std::string read_regular_file(const std::string& path, std::size_t max_bytes = std::size_t{1024} * 1024);

}  // namespace pgoutbox::config
