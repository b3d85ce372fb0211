#include "file_read.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace pgoutbox::config::detail {

FileContent read_file(const std::string& path, std::size_t max_bytes) {
  FileContent out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    out.failure = FileContent::Failure::open;
    out.error = errno;
    return out;
  }
  char buffer[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      out.failure = FileContent::Failure::read;
      out.error = errno;
      break;
    }
    if (n == 0) break;
    out.text.append(buffer, static_cast<std::size_t>(n));
    if (out.text.size() > max_bytes) {
      out.failure = FileContent::Failure::too_large;
      break;
    }
  }
  ::close(fd);
  return out;
}

}  // namespace pgoutbox::config::detail
