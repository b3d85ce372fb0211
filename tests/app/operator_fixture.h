#pragma once

// Runs the pgoutbox binary's operator commands (check, status, slot drop) as a user would and
// collects the exit code and what they printed (stdout and stderr together).

#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "child_process.h"

namespace pgoutbox::test {

struct CommandResult {
  int exit_code = -1;  // -1: killed or timed out
  std::string output;
  bool printed(const std::string& text) const { return output.find(text) != std::string::npos; }
};

inline CommandResult run_pgoutbox(const std::string& scratch, std::vector<std::string> args,
                                  std::vector<std::string> env = {},
                                  std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  static int sequence = 0;
  const std::string log_path = scratch + "/command-" + std::to_string(++sequence) + ".log";
  std::vector<std::string> argv = {PGOUTBOX_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildProcess process({.argv = argv, .log_path = log_path, .run_as = std::nullopt, .extra_env = std::move(env)});
  CommandResult result;
  const auto status = process.wait(timeout);
  if (status && WIFEXITED(*status)) result.exit_code = WEXITSTATUS(*status);
  std::ifstream log(log_path);
  std::stringstream text;
  text << log.rdbuf();
  result.output = text.str();
  return result;
}

// The line of `output` that begins with `prefix`, or "".
inline std::string line_starting(const std::string& output, const std::string& prefix) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return "";
}

}  // namespace pgoutbox::test
