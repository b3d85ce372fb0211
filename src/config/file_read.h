#pragma once

// Reads a whole file for the loader (the configuration itself, secret files), reporting what
// failed so that each caller words its own error. Only regular files are read, and at most
// `max_bytes` of them: `-c /dev/zero` or a FIFO must fail at once with a reason, not exhaust
// memory or block forever (SECURITY.md "Local files").

#include <sys/types.h>

#include <cstddef>
#include <string>

namespace pgoutbox::config::detail {

// A configuration file is a page of YAML; a mebibyte is far beyond any real one.
inline constexpr std::size_t kMaxConfigBytes = 1024 * 1024;

struct FileContent {
  enum class Failure { none, open, read, too_large, not_regular };
  std::string text;
  Failure failure = Failure::none;
  int error = 0;    // errno for open and read
  mode_t mode = 0;  // st_mode once the file is open (type and permission bits)
  uid_t owner = 0;
  bool read_only_mount = false;  // on a file system mounted read-only (statvfs's ST_RDONLY)

  // What went wrong, for a message: "cannot open: No such file or directory", "is not a
  // regular file (a FIFO)", "is larger than 1024 KiB".
  std::string describe(std::size_t max_bytes) const;
};

FileContent read_file(const std::string& path, std::size_t max_bytes = kMaxConfigBytes);

// "group and others", "others" or "" by the read permission bits of `mode`.
std::string readable_by(mode_t mode);

// Who besides `self` and root could change the file, or "" when nobody: "group", "others", "group
// and others" by its write bits, or "user 1000, its owner". A file on a read-only mount (a
// Kubernetes Secret, a `:ro` bind mount) is written by nobody here, whatever its bits and owner.
std::string writable_by(const FileContent& file, uid_t self);

// Why nobody but this process's user and root may write the file at `path`, or "" when nobody
// can: "is writable by group (mode 0664): <why>; chmod go-w <path>", or "is owned by user 1000,
// who can write it: <why>; chown it to root or to the user pgoutbox runs as".
std::string write_refusal(const std::string& path, const FileContent& file, const std::string& why);

}  // namespace pgoutbox::config::detail
