// Where `pgoutbox run` logs and in which format: stderr (a daemon's convention; stdout stays for
// a command's output), and `log_format: auto` decides on stderr being a terminal. The binary runs
// with one of stdout/stderr on a pseudo-terminal and the other in a file, both ways round: the
// issue's `run > log` on a terminal and `run 2> err`.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

struct Captured {
  std::string terminal;  // what reached the pseudo-terminal
  std::string file;      // what reached the file
  int exit_code = -1;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `pgoutbox run -c config` with `terminal_fd` (1 or 2) on a pseudo-terminal and the other
// of stdout/stderr in a file.
Captured run_with_terminal_on(int terminal_fd, const fs::path& config, const fs::path& file) {
  int master = -1;
  int slave = -1;
  if (::openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int out = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, STDIN_FILENO);
    ::dup2(slave, terminal_fd);
    ::dup2(out, terminal_fd == STDERR_FILENO ? STDOUT_FILENO : STDERR_FILENO);
    ::close(master);
    ::execl(PGOUTBOX_BINARY, PGOUTBOX_BINARY, "run", "-c", config.c_str(), static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  ::close(slave);
  Captured result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  char buffer[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd fd{master, POLLIN, 0};
    if (::poll(&fd, 1, 200) <= 0) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        break;
      }
      continue;
    }
    const ssize_t n = ::read(master, buffer, sizeof buffer);
    if (n <= 0) {  // EIO once the child closed the terminal's last descriptor
      int status = 0;
      ::waitpid(pid, &status, 0);
      result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      break;
    }
    result.terminal.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(master);
  result.file = read_file(file);
  return result;
}

class LogStreamTest : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("pgoutbox-log-stream-" + std::to_string(::getpid()));
  fs::path config = dir / "bad.yaml";

  void SetUp() override {
    fs::create_directories(dir);
    // Valid YAML the loader refuses: run logs one error and exits 2 before any connection.
    std::ofstream(config) << "postgres:\n  dsn: \"host=127.0.0.1 dbname=app\"\n  slot: s\n  publication: p\n"
                             "kafka:\n  brokers: \"127.0.0.1:1\"\ntables:\n  - table: public.outbox\n"
                             "shutdown_timeout: soon\n";
  }
  void TearDown() override { fs::remove_all(dir); }
};

TEST_F(LogStreamTest, RedirectingStdoutOnATerminalLeavesTheFileEmptyAndLogsTextOnTheTerminal) {
  const auto r = run_with_terminal_on(STDERR_FILENO, config, dir / "stdout.log");
  EXPECT_EQ(r.exit_code, 2) << r.terminal;
  EXPECT_EQ(r.file, "") << "logs must not go to stdout";
  EXPECT_NE(r.terminal.find("shutdown_timeout"), std::string::npos) << r.terminal;
  EXPECT_EQ(r.terminal.find("{\"timestamp\""), std::string::npos) << "a terminal gets text: " << r.terminal;
}

TEST_F(LogStreamTest, RedirectingStderrWritesJsonLinesToTheFileAndNothingToTheTerminal) {
  const auto r = run_with_terminal_on(STDOUT_FILENO, config, dir / "stderr.log");
  EXPECT_EQ(r.exit_code, 2) << r.file;
  EXPECT_EQ(r.terminal, "") << "logs must not go to stdout";
  ASSERT_FALSE(r.file.empty());
  EXPECT_EQ(r.file.rfind("{\"timestamp\"", 0), 0U) << "stderr is not a terminal, so auto means JSON: " << r.file;
  EXPECT_NE(r.file.find("shutdown_timeout"), std::string::npos) << r.file;
}

}  // namespace
