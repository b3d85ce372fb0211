#include "file_read.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "pgoutbox/config/regular_file.h"

namespace pgoutbox::config::detail {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::string FileContent::describe(std::size_t max_bytes) const {
  switch (failure) {
    case Failure::none:
      return {};
    case Failure::open:
      return fmt::format("cannot open: {}", std::strerror(error));
    case Failure::read:
      return fmt::format("cannot read: {}", std::strerror(error));
    case Failure::too_large:
      return fmt::format("is larger than {} KiB; is it the right file?", max_bytes / 1024);
    case Failure::not_regular:
      return fmt::format("is not a regular file ({})", kind_of(mode));
  }
  return {};
}

FileContent read_file(const std::string& path, std::size_t max_bytes) {
  FileContent out;
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. It does not change
  // how a regular file reads.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    out.failure = FileContent::Failure::open;
    out.error = errno;
    return out;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    out.failure = FileContent::Failure::read;
    out.error = errno;
    ::close(fd);
    return out;
  }
  out.mode = st.st_mode;
  out.owner = st.st_uid;
  struct statvfs vfs {};
  out.read_only_mount = ::fstatvfs(fd, &vfs) == 0 && (vfs.f_flag & ST_RDONLY) != 0;
  if (!S_ISREG(st.st_mode)) {
    out.failure = FileContent::Failure::not_regular;
    ::close(fd);
    return out;
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    out.failure = FileContent::Failure::too_large;
    ::close(fd);
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
    if (out.text.size() > max_bytes) {  // the file grew while being read
      out.failure = FileContent::Failure::too_large;
      out.text.clear();
      break;
    }
  }
  ::close(fd);
  return out;
}

std::string readable_by(mode_t mode) {
  const bool group = (mode & S_IRGRP) != 0;
  const bool others = (mode & S_IROTH) != 0;
  if (group && others) return "group and others";
  if (others) return "others";
  if (group) return "group";
  return {};
}

std::string writable_by(const FileContent& file, uid_t self) {
  if (file.read_only_mount) return {};
  if (file.owner != self && file.owner != 0) return fmt::format("user {}, its owner", file.owner);
  const bool group = (file.mode & S_IWGRP) != 0;
  const bool others = (file.mode & S_IWOTH) != 0;
  if (group && others) return "group and others";
  if (others) return "others";
  if (group) return "group";
  return {};
}

std::string write_refusal(const std::string& path, const FileContent& file, const std::string& why) {
  const auto who = writable_by(file, ::geteuid());
  if (who.empty()) return {};
  if (file.owner != ::geteuid() && file.owner != 0) {
    return fmt::format("{} is owned by {}, who can write it: {}; chown it to root or to the user pgoutbox runs as",
                       path, who.substr(0, who.find(',')), why);
  }
  return fmt::format("{} is writable by {} (mode {:04o}): {}; chmod go-w {}", path, who, file.mode & 07777, why, path);
}

}  // namespace pgoutbox::config::detail

namespace pgoutbox::config {

std::string read_regular_file(const std::string& path, std::size_t max_bytes) {
  auto content = detail::read_file(path, max_bytes);
  if (content.failure != detail::FileContent::Failure::none) throw std::runtime_error(content.describe(max_bytes));
  return std::move(content.text);
}

}  // namespace pgoutbox::config
