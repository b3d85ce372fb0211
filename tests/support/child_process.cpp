#include "child_process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace pgoutbox::test {
namespace {

// Live process groups, read by the signal handler (only lock-free atomics there).
constexpr std::size_t kMaxGroups = 64;
std::array<std::atomic<pid_t>, kMaxGroups> g_groups{};

// Scratch directories, removed by the signal handler too (an interrupted run leaves nothing).
constexpr std::size_t kMaxScratch = 32;
constexpr std::size_t kMaxPath = 256;
std::array<std::atomic<bool>, kMaxScratch> g_scratch_used{};
std::array<std::array<char, kMaxPath>, kMaxScratch> g_scratch_paths{};

void kill_all_groups_and_die(int sig) {
  for (auto& group : g_groups) {
    const pid_t pgid = group.load();
    if (pgid > 0) {
      ::kill(-pgid, SIGCONT);
      ::kill(-pgid, SIGKILL);
    }
  }
  for (auto& group : g_groups) {
    const pid_t pgid = group.load();
    if (pgid > 0) ::waitpid(pgid, nullptr, 0);
  }
  // fork, execv and waitpid are async-signal-safe; the paths were copied in at creation.
  std::array<char*, kMaxScratch + 3> argv{};
  std::size_t n = 0;
  static char rm[] = "/bin/rm";
  static char flags[] = "-rf";
  argv[n++] = rm;
  argv[n++] = flags;
  for (std::size_t i = 0; i < kMaxScratch; ++i) {
    if (g_scratch_used[i].load()) argv[n++] = g_scratch_paths[i].data();
  }
  if (n > 2) {
    const pid_t rm_pid = ::fork();
    if (rm_pid == 0) {
      ::execv(rm, argv.data());
      ::_exit(127);
    }
    if (rm_pid > 0) ::waitpid(rm_pid, nullptr, 0);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void register_scratch(const std::string& path) {
  if (path.size() >= kMaxPath) return;
  for (std::size_t i = 0; i < kMaxScratch; ++i) {
    if (!g_scratch_used[i].load()) {
      std::copy(path.begin(), path.end(), g_scratch_paths[i].begin());
      g_scratch_paths[i][path.size()] = '\0';
      g_scratch_used[i].store(true);
      return;
    }
  }
}

void unregister_scratch(const std::string& path) {
  for (std::size_t i = 0; i < kMaxScratch; ++i) {
    if (g_scratch_used[i].load() && path == g_scratch_paths[i].data()) {
      g_scratch_used[i].store(false);
      return;
    }
  }
}

void install_cleanup_handlers() {
  static const bool installed = [] {
    for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction action {};
      action.sa_handler = kill_all_groups_and_die;
      sigemptyset(&action.sa_mask);
      ::sigaction(sig, &action, nullptr);
    }
    return true;
  }();
  (void)installed;
}

void register_group(pid_t pgid) {
  for (auto& group : g_groups) {
    pid_t expected = 0;
    if (group.compare_exchange_strong(expected, pgid)) return;
  }
  throw std::runtime_error("too many service processes");
}

void unregister_group(pid_t pgid) {
  for (auto& group : g_groups) {
    pid_t expected = pgid;
    if (group.compare_exchange_strong(expected, 0)) return;
  }
}

[[noreturn]] void child_fail(const char* what) {
  const char* reason = std::strerror(errno);
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, what, std::strlen(what));
  n = ::write(STDERR_FILENO, ": ", 2);
  n = ::write(STDERR_FILENO, reason, std::strlen(reason));
  n = ::write(STDERR_FILENO, "\n", 1);
  ::_exit(127);
}

// PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process. Tests
// start and restart services from helper threads (a restart while the main thread streams),
// so every fork happens on one thread that lives as long as the process.
class SpawnerThread {
 public:
  static SpawnerThread& instance() {
    static SpawnerThread* spawner = new SpawnerThread();  // never destroyed: outlives all children
    return *spawner;
  }

  template <class Fn>
  auto run(Fn&& fn) -> decltype(fn()) {
    using R = decltype(fn());
    std::packaged_task<R()> task(std::forward<Fn>(fn));
    auto result = task.get_future();
    {
      std::lock_guard lock(mutex_);
      queue_.emplace_back([&task] { task(); });
    }
    wake_.notify_one();
    return result.get();
  }

 private:
  SpawnerThread() {
    std::thread([this] {
      for (;;) {
        std::function<void()> job;
        {
          std::unique_lock lock(mutex_);
          wake_.wait(lock, [this] { return !queue_.empty(); });
          job = std::move(queue_.front());
          queue_.pop_front();
        }
        job();
      }
    }).detach();
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
};

}  // namespace

std::optional<RunAs> service_account() {
  if (::geteuid() != 0) return std::nullopt;
  for (const char* name : {"postgres", "nobody"}) {
    if (const passwd* pw = ::getpwnam(name)) return RunAs{pw->pw_uid, pw->pw_gid, name};
  }
  throw std::runtime_error("running as root, but neither a 'postgres' nor a 'nobody' account exists");
}

ChildProcess::ChildProcess(Options options) {
  if (options.argv.empty()) throw std::invalid_argument("ChildProcess: empty argv");
  install_cleanup_handlers();

  // Everything the child needs is prepared before fork: only async-signal-safe calls after it.
  std::vector<char*> argv;
  for (auto& arg : options.argv) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) env_storage.emplace_back(*e);
  for (auto& extra : options.extra_env) env_storage.push_back(extra);
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  const int log_fd = ::open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) throw std::runtime_error("cannot open " + options.log_path + ": " + std::strerror(errno));
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = ::getpid();

  const pid_t pid = SpawnerThread::instance().run([&]() -> pid_t {
    const pid_t forked = ::fork();
    if (forked != 0) return forked;
    ::setpgid(0, 0);
    ::dup2(devnull, STDIN_FILENO);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (const int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, SIG_DFL);
    if (options.run_as) {
      // Raw syscalls: glibc's wrappers coordinate threads, which a forked child doesn't have.
      if (::syscall(SYS_setgroups, 0, nullptr) != 0) child_fail("setgroups");
      if (::syscall(SYS_setgid, options.run_as->gid) != 0) child_fail("setgid");
      if (::syscall(SYS_setuid, options.run_as->uid) != 0) child_fail("setuid");
    }
    // After the uid change, which would clear it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    ::execve(argv[0], argv.data(), envp.data());
    child_fail(argv[0]);
  });
  if (pid < 0) {
    ::close(log_fd);
    ::close(devnull);
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  ::close(log_fd);
  ::close(devnull);
  ::setpgid(pid, pid);  // also from the parent, so that the group exists before we signal it
  pid_ = pid;
  register_group(pid_);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept : pid_(other.pid_), status_(other.status_) {
  other.pid_ = -1;
}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    kill_and_reap();
    pid_ = other.pid_;
    status_ = other.status_;
    other.pid_ = -1;
  }
  return *this;
}

ChildProcess::~ChildProcess() { kill_and_reap(); }

bool ChildProcess::running() {
  if (pid_ <= 0 || status_) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    status_ = status;
    return false;
  }
  return true;
}

void ChildProcess::signal_group(int sig) const {
  if (pid_ > 0) ::kill(-pid_, sig);
}

void ChildProcess::signal_leader(int sig) const {
  if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

std::optional<int> ChildProcess::wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status_;
}

void ChildProcess::kill_and_reap() {
  if (pid_ <= 0) return;
  signal_group(SIGCONT);
  signal_group(SIGKILL);
  if (!status_) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {}
    status_ = status;
  }
  release();
}

void ChildProcess::release() {
  unregister_group(pid_);
  pid_ = -1;
}

ScratchDir::ScratchDir(const std::string& prefix, const std::optional<RunAs>& owner) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/pgoutbox-" + prefix + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("mkdtemp " + pattern + ": " + std::strerror(errno));
  path_ = pattern;
  install_cleanup_handlers();
  register_scratch(path_);
  if (owner && ::chown(path_.c_str(), owner->uid, owner->gid) != 0) {
    throw std::runtime_error("chown " + path_ + ": " + std::strerror(errno));
  }
}

ScratchDir::~ScratchDir() {
  unregister_scratch(path_);
  if (std::getenv("PGOUTBOX_KEEP_SCRATCH") != nullptr) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string tail_of(const std::string& path) {
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  return text.size() > 4000 ? text.substr(text.size() - 4000) : text;
}

namespace {

// The ports handed out so far by any test process on this machine, one "port pid" line each,
// read and rewritten under an exclusive lock on the file itself. Tests run in parallel (ctest
// -j), and the port one process found free it gives to a broker or a Postgres a moment later:
// without the registry a second process could find the same port free in between.
constexpr const char* kPortRegistry = "/tmp/pgoutbox-test-ports";
// Below Linux's ephemeral range (32768-60999), so that no outgoing connection of any process can
// take a port between the moment it is found free and the moment its service binds it.
constexpr int kFirstPort = 20000;
constexpr int kPortCount = 12000;

bool alive(pid_t pid) { return pid == ::getpid() || ::kill(pid, 0) == 0 || errno == EPERM; }

bool bindable(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

int free_loopback_port() {
  static std::mutex mutex;
  const std::lock_guard lock(mutex);
  struct Registry {
    int fd = ::open(kPortRegistry, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    ~Registry() {
      if (fd >= 0) ::close(fd);  // and with it the lock
    }
  } registry;
  const int fd = registry.fd;
  if (fd < 0) throw std::runtime_error(std::string("cannot open ") + kPortRegistry + ": " + std::strerror(errno));
  ::fchmod(fd, 0666);  // a test process that is not root may be next (umask took the write bits)
  if (::flock(fd, LOCK_EX) != 0) throw std::runtime_error("cannot lock the port registry");
  // Claims of processes that have exited are dropped: their services are gone with them.
  std::map<int, pid_t> claims;
  {
    std::string text;
    std::array<char, 4096> buffer{};
    for (ssize_t n; (n = ::read(fd, buffer.data(), buffer.size())) > 0;) text.append(buffer.data(), n);
    std::istringstream lines(text);
    int port = 0;
    pid_t pid = 0;
    while (lines >> port >> pid) {
      if (alive(pid)) claims[port] = pid;
    }
  }
  thread_local std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> pick(kFirstPort, kFirstPort + kPortCount - 1);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int port = pick(random);
    if (claims.contains(port) || !bindable(port)) continue;
    claims[port] = ::getpid();
    std::string text;
    for (const auto& [p, pid] : claims) text += std::to_string(p) + " " + std::to_string(pid) + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
      throw std::runtime_error("cannot write the port registry");
    }
    return port;
  }
  throw std::runtime_error("cannot find a free port on 127.0.0.1");
}

}  // namespace pgoutbox::test
