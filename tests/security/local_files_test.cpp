// Hostile files and local settings (issue 19 items 5, 6, 7, 8 and 10; SECURITY.md "Secrets and
// transport"), with the real pgoutbox binary:
//   - a configuration that is a device, a FIFO, a directory or over 1 MiB is refused at once
//     (exit 2, with the reason), and so is such a connector file for `config from-debezium`
//     (issue 25 item 7); a secret file readable by others is a warning;
//   - settings that weaken TLS are WARN lines in `check` and logged once by `run`;
//   - caps beyond their ceilings are configuration errors;
//   - no command is dumpable (its /proc entries belong to root, not to the user it runs as);
//   - a text log line stays one line whatever a message holds;
//   - the compose file publishes ports on 127.0.0.1 only.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <gtest/gtest.h>
#include <spdlog/details/log_msg.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "child_process.h"
#include "eventually.h"
#include "pgoutbox/logging/logging.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr int kExitConfig = 2;

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::size_t occurrences(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

class LocalFilesTest : public ::testing::Test {
 protected:
  ScratchDir dir{"security-files", service_account()};

  struct Result {
    std::optional<int> exit_code;  // nullopt: still running at the deadline (then killed)
    std::string output;
  };

  // Runs the binary with `args`, waits at most `timeout`.
  Result run_binary(std::vector<std::string> args, std::chrono::milliseconds timeout, const std::string& log_name,
                    std::vector<std::string> env = {}) {
    const std::string log = dir.path() + "/" + log_name;
    args.insert(args.begin(), PGOUTBOX_BINARY);
    ChildProcess child({.argv = args, .log_path = log, .run_as = std::nullopt, .extra_env = std::move(env)});
    const auto status = child.wait(timeout);
    Result result;
    if (!status) {
      child.kill_and_reap();
    } else if (WIFEXITED(*status)) {
      result.exit_code = WEXITSTATUS(*status);
    } else {
      result.exit_code = -1;
    }
    result.output = file_text(log);
    return result;
  }

  std::string write(const std::string& name, const std::string& text, mode_t mode = 0600) {
    const std::string path = dir.path() + "/" + name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }

  // A configuration that loads; Postgres and Kafka are unreachable (nothing listens on port 1).
  std::string minimal(const std::string& extra = "", const std::string& kafka_properties = "") {
    return "postgres:\n  dsn: \"host=127.0.0.1 port=1 dbname=app user=relay connect_timeout=1\"\n"
           "kafka:\n  brokers: \"127.0.0.1:1\"\n" +
           (kafka_properties.empty() ? std::string() : "  properties:\n" + kafka_properties) +
           "tables:\n  - table: public.outbox\nlog_format: text\n" + extra;
  }
};

TEST_F(LocalFilesTest, ConfigurationThatIsNotASmallRegularFileIsRefusedAtOnce) {
  const std::string fifo = dir.path() + "/config.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string big = write("big.yaml", minimal() + "# " + std::string(2 << 20, 'x') + "\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/dev/zero", "is not a regular file (a character device)"},
      {fifo, "is not a regular file (a FIFO)"},
      {dir.path(), "is not a regular file (a directory)"},
      {big, "is larger than 1024 KiB"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& [path, says] = cases[i];
    const auto started = std::chrono::steady_clock::now();
    const auto result = run_binary({"run", "-c", path}, 15s, "config-" + std::to_string(i) + ".log");
    EXPECT_EQ(result.exit_code, kExitConfig) << path << "\n" << result.output;
    EXPECT_NE(result.output.find(says), std::string::npos) << path << "\n" << result.output;
    EXPECT_LT(std::chrono::steady_clock::now() - started, 10s) << path;
  }
}

// Issue 25 item 7: `config from-debezium` reads the connector's JSON with the configuration's
// bounds. Before, /dev/zero was read until bad_alloc and a FIFO blocked for a writer. The child's
// address space is capped, so that a regression fails here instead of eating the machine's memory.
TEST_F(LocalFilesTest, ConnectorFileThatIsNotASmallRegularFileIsRefusedAtOnce) {
  // AddressSanitizer reserves terabytes of shadow address space at start: no cap under it (the
  // release pass keeps the cap; a regression there still fails within the 15 s).
#if defined(__SANITIZE_ADDRESS__)
  const std::string cap;
#else
  const std::string cap = "ulimit -v 2097152 && ";
#endif
  const std::string fifo = dir.path() + "/connector.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string big = write("big.json", "{\"x\": \"" + std::string(2 << 20, 'x') + "\"}\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/dev/zero", "/dev/zero: is not a regular file (a character device)"},
      {fifo, "connector.fifo: is not a regular file (a FIFO)"},
      {dir.path(), "is not a regular file (a directory)"},
      {big, "big.json: is larger than 1024 KiB"},
      {dir.path() + "/missing.json", "missing.json: cannot open: No such file or directory"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& [path, says] = cases[i];
    const std::string log = dir.path() + "/connector-" + std::to_string(i) + ".log";
    const auto started = std::chrono::steady_clock::now();
    ChildProcess child(
        {.argv = {"/bin/sh", "-c", cap + "exec \"$0\" config from-debezium \"$1\"", PGOUTBOX_BINARY, path},
         .log_path = log,
         .run_as = std::nullopt,
         .extra_env = {}});
    const auto status = child.wait(15s);
    if (!status) child.kill_and_reap();
    const auto output = file_text(log);
    ASSERT_TRUE(status) << path << ": still running after 15 s\n" << output;
    ASSERT_TRUE(WIFEXITED(*status)) << path << ": ended by signal " << WTERMSIG(*status) << "\n" << output;
    EXPECT_EQ(WEXITSTATUS(*status), kExitConfig) << path << "\n" << output;
    EXPECT_NE(output.find("pgoutbox config from-debezium: "), std::string::npos) << path << "\n" << output;
    EXPECT_NE(output.find(says), std::string::npos) << path << "\n" << output;
    EXPECT_LT(std::chrono::steady_clock::now() - started, 10s) << path;
  }
}

TEST_F(LocalFilesTest, WeakTransportAndExposedSecretsAreWarnedByCheckAndOnceByRun) {
  const std::string secret = write("sasl.secret", "s3cret\n", 0644);
  const auto config = write("weak.yaml", minimal("",
                                                 "    enable.ssl.certificate.verification: \"false\"\n"
                                                 "    security.protocol: SASL_PLAINTEXT\n"
                                                 "    sasl.mechanism: PLAIN\n"
                                                 "    sasl.username: relay\n"
                                                 "    sasl.password_file: \"" +
                                                     secret + "\"\n"));
  const auto check = run_binary({"check", "-c", config, "--kafka-timeout", "1"}, 60s, "check.log");
  ASSERT_TRUE(check.exit_code) << check.output;
  for (const std::string& says : std::vector<std::string>{
           "WARN  postgres tls: sslmode is prefer", "WARN  kafka tls: enable.ssl.certificate.verification is false",
           "WARN  kafka tls: a SASL password is set but security.protocol is sasl_plaintext",
           "WARN  secret file: kafka.properties.sasl.password_file: " + secret +
               " is readable by group and others (mode 0644)"}) {
    EXPECT_NE(check.output.find(says), std::string::npos) << says << "\n" << check.output;
  }
  EXPECT_EQ(check.output.find("s3cret"), std::string::npos) << "the secret itself is never printed";

  // `run` says the same once at start, then keeps retrying the unreachable Postgres.
  const std::string log = dir.path() + "/run.log";
  ChildProcess run(
      {.argv = {PGOUTBOX_BINARY, "run", "-c", config}, .log_path = log, .run_as = std::nullopt, .extra_env = {}});
  PGOUTBOX_ASSERT_EVENTUALLY(occurrences(file_text(log), "retrying in") >= 2, 30s);
  const auto text = file_text(log);
  EXPECT_EQ(occurrences(text, "sslmode is prefer"), 1U) << text;
  EXPECT_EQ(occurrences(text, "enable.ssl.certificate.verification is false"), 1U) << text;
  EXPECT_EQ(occurrences(text, "readable by group and others"), 1U) << text;
  EXPECT_EQ(text.find("s3cret"), std::string::npos);
  run.signal_leader(SIGTERM);
  EXPECT_TRUE(run.wait(30s));

  // With verify-full, verification on and SASL_SSL, no warning is left but the file's mode.
  ::chmod(secret.c_str(), 0600);
  const auto strict = write("strict.yaml",
                            "postgres:\n  dsn: \"host=127.0.0.1 port=1 dbname=app user=relay sslmode=verify-full "
                            "connect_timeout=1\"\nkafka:\n  brokers: \"127.0.0.1:1\"\n  properties:\n"
                            "    security.protocol: SASL_SSL\n    sasl.mechanism: PLAIN\n"
                            "    sasl.username: relay\n    sasl.password_file: \"" +
                                secret +
                                "\"\n"
                                "tables:\n  - table: public.outbox\n");
  const auto clean = run_binary({"check", "-c", strict, "--kafka-timeout", "1"}, 60s, "check-strict.log");
  EXPECT_EQ(clean.output.find("WARN  postgres tls"), std::string::npos) << clean.output;
  EXPECT_EQ(clean.output.find("WARN  kafka tls"), std::string::npos) << clean.output;
  EXPECT_EQ(clean.output.find("WARN  secret file"), std::string::npos) << clean.output;
}

// Issue 25 item 6: libpq quotes a URI's password when its percent-escape is bad
// (`invalid percent-encoded token: "ab%zz"`), and pgoutbox printed that message as it came. Every
// libpq and librdkafka message passes redaction now: the reason still reaches the operator, the
// password never does, from `check`, `status` or `run`. The DSN comes from the environment, the
// one place a password in it is accepted.
TEST_F(LocalFilesTest, APasswordLibpqQuotesInAnErrorIsNeverPrinted) {
  const std::string password = "ab%zz";
  const std::vector<std::string> env = {"PGOUTBOX_POSTGRES_DSN=postgresql://relay:" + password +
                                        "@127.0.0.1:1/app?connect_timeout=1"};
  const auto config_text = [&](const std::string& format) {
    return "kafka:\n  brokers: \"127.0.0.1:1\"\ntables:\n  - table: public.outbox\nlog_format: " + format + "\n";
  };
  const auto config = write("bad-escape.yaml", config_text("text"));
  const auto check = run_binary({"check", "-c", config, "--kafka-timeout", "1"}, 60s, "escape-check.log", env);
  EXPECT_TRUE(check.exit_code) << check.output;
  EXPECT_NE(check.output.find("invalid percent-encoded token"), std::string::npos) << check.output;
  EXPECT_EQ(check.output.find(password), std::string::npos) << check.output;

  const auto status = run_binary({"status", "-c", config}, 30s, "escape-status.log", env);
  EXPECT_TRUE(status.exit_code) << status.output;
  EXPECT_NE(status.output.find("invalid percent-encoded token"), std::string::npos) << status.output;
  EXPECT_EQ(status.output.find(password), std::string::npos) << status.output;

  for (const std::string format : {"text", "json"}) {
    const std::string log = dir.path() + "/escape-run-" + format + ".log";
    const auto run_config = write("bad-escape-" + format + ".yaml", config_text(format));
    ChildProcess run({.argv = {PGOUTBOX_BINARY, "run", "-c", run_config},
                      .log_path = log,
                      .run_as = std::nullopt,
                      .extra_env = env});
    PGOUTBOX_EXPECT_EVENTUALLY(
        file_text(log).find("invalid percent-encoded token") != std::string::npos || !run.running(), 30s);
    if (run.running()) {
      run.signal_leader(SIGTERM);
      EXPECT_TRUE(run.wait(30s));
    }
    const auto text = file_text(log);
    EXPECT_NE(text.find("invalid percent-encoded token"), std::string::npos) << text;
    EXPECT_EQ(text.find(password), std::string::npos) << text;
  }
}

TEST_F(LocalFilesTest, CapsBeyondTheirCeilingsAreConfigurationErrors) {
  for (const auto& [extra, says] : std::vector<std::pair<std::string, std::string>>{
           {"limits:\n  max_in_flight_records: 18446744073709551615\n",
            "limits.max_in_flight_records: must be at most 1000000"},
           {"limits:\n  max_in_flight_bytes: 16EiB\n", "limits.max_in_flight_bytes"},
           {"limits:\n  max_in_flight_bytes: 4GiB\n", "limits.max_in_flight_bytes: must be at most 1GiB"}}) {
    const auto result = run_binary({"run", "-c", write("caps.yaml", minimal(extra))}, 15s, "caps.log");
    EXPECT_EQ(result.exit_code, kExitConfig) << extra << result.output;
    EXPECT_NE(result.output.find(says), std::string::npos) << result.output;
  }
}

TEST_F(LocalFilesTest, RunIsNotDumpable) {
  const auto account = service_account();
  if (!account) GTEST_SKIP() << "needs root to run pgoutbox as another user";
  const auto config = write("dump.yaml", minimal());
  ASSERT_EQ(::chown(config.c_str(), account->uid, account->gid), 0);
  ChildProcess run({.argv = {PGOUTBOX_BINARY, "run", "-c", config},
                    .log_path = dir.path() + "/dump.log",
                    .run_as = account,
                    .extra_env = {}});
  const std::string log = dir.path() + "/dump.log";
  PGOUTBOX_ASSERT_EVENTUALLY(file_text(log).find("retrying in") != std::string::npos, 30s);
  // A non-dumpable process's /proc entries belong to root (proc(5), PR_SET_DUMPABLE); a dumpable
  // one's to the user it runs as, who could then read its memory or get a core with its secrets.
  struct stat st {};
  ASSERT_EQ(::stat(("/proc/" + std::to_string(run.pid()) + "/status").c_str(), &st), 0);
  const auto status = file_text("/proc/" + std::to_string(run.pid()) + "/status");
  EXPECT_NE(status.find("Uid:\t" + std::to_string(account->uid)), std::string::npos) << "runs as " << account->name;
  EXPECT_EQ(st.st_uid, 0U) << "/proc/<pid> belongs to the process's user: it is dumpable";
  run.signal_leader(SIGTERM);
  EXPECT_TRUE(run.wait(30s));
}

// Secrets given in the environment leave it once the configuration holds them (issue 38 item 6):
// a child (librdkafka runs `sasl.kerberos.kinit.cmd` through a shell) inherits none, and the bytes
// /proc/<pid>/environ shows hold none. Other variables stay.
TEST_F(LocalFilesTest, SecretsGivenInTheEnvironmentAreGoneFromItOnceLoaded) {
  if (::geteuid() != 0) GTEST_SKIP() << "a non-dumpable process's /proc/<pid>/environ is root's to read";
  const std::string password = "pw-4f1c9a-environ-marker";
  const std::string sasl = "sasl-77d0e2-environ-marker";
  const std::string key = "key-" + std::string(60, 'k');
  const std::string dsn = "host=127.0.0.1 port=1 dbname=app user=relay connect_timeout=1 sslpassword=dsn-5b3e-marker";
  const auto config = write("environ.yaml", minimal());
  ChildProcess run(
      {.argv = {PGOUTBOX_BINARY, "run", "-c", config},
       .log_path = dir.path() + "/environ.log",
       .run_as = std::nullopt,
       .extra_env = {"PGOUTBOX_POSTGRES_PASSWORD=" + password, "PGOUTBOX_KAFKA_PROPERTY_SASL_PASSWORD=" + sasl,
                     "PGOUTBOX_KAFKA_PROPERTY_SASL_USERNAME=relay-user", "PGOUTBOX_CHECKPOINT_SIGNING_KEY=" + key,
                     "PGOUTBOX_POSTGRES_DSN=" + dsn}});
  const std::string log = dir.path() + "/environ.log";
  PGOUTBOX_ASSERT_EVENTUALLY(file_text(log).find("retrying in") != std::string::npos, 30s);
  const auto environ_bytes = file_text("/proc/" + std::to_string(run.pid()) + "/environ");
  for (const auto& secret : {password, sasl, key, std::string("dsn-5b3e-marker")})
    EXPECT_EQ(environ_bytes.find(secret), std::string::npos) << secret << " is still in /proc/<pid>/environ";
  EXPECT_NE(environ_bytes.find("PGOUTBOX_KAFKA_PROPERTY_SASL_USERNAME=relay-user"), std::string::npos)
      << "a variable that is no secret stays";
  run.signal_leader(SIGTERM);
  EXPECT_TRUE(run.wait(30s));
}

// check, status and republish read the same secrets as run: each is non-dumpable from its start
// (issue 25 item 9). Each is held in its Postgres connection by a listener that accepts and never
// answers, and looked at while it waits there.
TEST_F(LocalFilesTest, EveryCommandIsNotDumpable) {
  const auto account = service_account();
  if (!account) GTEST_SKIP() << "needs root to run pgoutbox as another user";
  const int port = free_loopback_port();
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(listener, 8), 0);
  const auto config =
      write("silent.yaml", "postgres:\n  dsn: \"host=127.0.0.1 port=" + std::to_string(port) +
                               " dbname=app user=relay connect_timeout=60\"\nkafka:\n  brokers: "
                               "\"127.0.0.1:1\"\ntables:\n  - table: public.outbox\nlog_format: text\n");
  ASSERT_EQ(::chown(config.c_str(), account->uid, account->gid), 0);
  for (const std::vector<std::string>& command : std::vector<std::vector<std::string>>{
           {"check", "-c", config, "--kafka-timeout", "1"},
           {"status", "-c", config},
           {"republish", "-c", config, "--table", "public.outbox", "--where", "true", "--dry-run"}}) {
    std::vector<std::string> argv = {PGOUTBOX_BINARY};
    argv.insert(argv.end(), command.begin(), command.end());
    ChildProcess child(
        {.argv = argv, .log_path = dir.path() + "/" + command[0] + ".log", .run_as = account, .extra_env = {}});
    pollfd waiting{listener, POLLIN, 0};
    ASSERT_EQ(::poll(&waiting, 1, 30'000), 1)
        << command[0] << " never connected: " << file_text(dir.path() + "/" + command[0] + ".log");
    const int connection = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    ASSERT_GE(connection, 0);
    struct stat st {};
    ASSERT_EQ(::stat(("/proc/" + std::to_string(child.pid()) + "/status").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0U) << command[0] << ": /proc/<pid> belongs to the process's user: it is dumpable";
    child.kill_and_reap();
    ::close(connection);
  }
  ::close(listener);
}

TEST(TextLogs, ARowValueCannotForgeALineOrSteerTheTerminal) {
  const auto formatter = logging::make_formatter(logging::Format::text);
  const std::string hostile =
      "poison x\n2026-12-01T00:00:00.000Z info all good\r\x1b[2J\xc2\x9b"
      "31m" +
      std::string(100'000, 'y');
  spdlog::details::log_msg msg(spdlog::source_loc{}, "", spdlog::level::warn, hostile);
  spdlog::memory_buf_t out;
  formatter->format(msg, out);
  const std::string line(out.data(), out.size());
  EXPECT_EQ(occurrences(line, "\n"), 1U) << "one line, ending in its newline";
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\r'), std::string::npos);
  EXPECT_EQ(line.find('\x1b'), std::string::npos);
  EXPECT_EQ(line.find("\xc2\x9b"), std::string::npos);
  EXPECT_NE(line.find("poison x\\n2026-12-01"), std::string::npos) << line.substr(0, 200);
  EXPECT_LT(line.size(), 8U * 1024U) << "a row value cannot make a line of 100 KB";

  logging::EventFields fields;
  const std::string long_id(10'000, 'i');
  fields.event_id = long_id;
  std::ostringstream sink_text;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(sink_text);
  sink->set_formatter(logging::make_formatter(logging::Format::json));
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  logging::event(spdlog::level::warn, fields, "x");
  spdlog::set_default_logger(previous);
  const auto captured = sink_text.str();
  ASSERT_NE(captured.find("\"event_id\":\"iiii"), std::string::npos) << captured;
  EXPECT_LT(captured.size(), 1024U) << "event fields are cut too";
}

TEST(ComposeFile, PublishesPortsOnLoopbackOnly) {
  const YAML::Node compose = YAML::LoadFile(std::string(PGOUTBOX_SOURCE_DIR) + "/docker/compose.yaml");
  std::size_t published = 0;
  for (const auto& service : compose["services"]) {
    for (const auto& port : service.second["ports"]) {
      const auto text = port.as<std::string>();
      EXPECT_EQ(text.rfind("127.0.0.1:", 0), 0U)
          << service.first.as<std::string>() << " publishes " << text << " on every interface";
      ++published;
    }
  }
  EXPECT_GE(published, 4U);
}

}  // namespace
}  // namespace pgoutbox::test
