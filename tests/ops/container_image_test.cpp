// The container image (docker/Dockerfile), built by scripts/image.sh with podman from this build's
// binary and run for real against the test's own Postgres and Kafka on loopback (--network host),
// the way the Helm chart runs it: as the image's numeric non-root user, the root file system
// read-only with no writable /tmp, every capability dropped, no new privileges. `check` passes,
// rows arrive in Kafka, and SIGTERM to the container's PID 1 (what the kubelet sends) ends it
// with exit 0 and the slot confirmed past the last row. Without root (debootstrap, podman's root
// storage) the suite is skipped; CI runs as root.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

#include "command.h"
#include "eventually.h"
#include "kafka_client.h"
#include "pgoutbox/lsn.h"
#include "pgoutbox_config.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

const std::string kRoot = PGOUTBOX_SOURCE_DIR;
// A tag of this build tree's own: two trees on one machine (worktrees, CI beside a developer)
// each run the image of their binary, and a rerun in the same tree reuses its cached layers.
const std::string kImage = std::string("localhost/pgoutbox:") + PGOUTBOX_VERSION + "-test-" +
                           std::to_string(std::hash<std::string>{}(PGOUTBOX_BINARY) % 1000000007);

std::string image_script() { return "bash " + kRoot + "/scripts/image.sh"; }
CommandResult podman(const std::string& args) { return run_command(image_script() + " podman " + args); }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The value of the first line of a /proc status file that starts with `key` ("Uid:").
std::string status_field(const std::string& status, const std::string& key) {
  std::istringstream lines(status);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(key, 0) == 0) return line.substr(key.size());
  }
  return "";
}

// Removes a container however the test ends: podman run's client dying (a failed assertion, the
// test killed) would leave the container running on.
class ContainerRemover {
 public:
  explicit ContainerRemover(std::string name) : name_(std::move(name)) {}
  ~ContainerRemover() { podman("rm --force --ignore " + name_); }
  ContainerRemover(const ContainerRemover&) = delete;
  ContainerRemover& operator=(const ContainerRemover&) = delete;

 private:
  std::string name_;
};

class ContainerImage : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) GTEST_SKIP() << "debootstrap and podman's root storage need root";
    const auto start = std::chrono::steady_clock::now();
    const auto built = run_command(image_script() + " --binary " + PGOUTBOX_BINARY + " --tag " + kImage);
    std::printf("OPS scripts/image.sh (%lld s):\n%s",
                static_cast<long long>(
                    std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start).count()),
                built.output.c_str());
    built_ = built.status == 0;
    build_output_ = built.output;
  }

  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "debootstrap and podman's root storage need root";
    ASSERT_TRUE(built_) << "scripts/image.sh failed:\n" << build_output_;
  }

  static inline bool built_ = false;
  static inline std::string build_output_;
};

// The binary loads in the image: every shared library it needs is there (docker/runtime-packages.sh
// derived them from the binary); and the image says what it runs as and what it runs.
TEST_F(ContainerImage, TheBinaryLoadsAndTheImageRunsAsANumericNonRootUser) {
  const auto version = podman("run --rm --network none " + kImage + " --version");
  EXPECT_EQ(version.status, 0) << version.output;
  // Its first line; more may follow (the version of a library linked in).
  EXPECT_EQ(version.output.rfind(std::string("pgoutbox ") + PGOUTBOX_VERSION + "\n", 0), 0U) << version.output;

  // This build's binary (stripped), not one a stale layer cache kept.
  ScratchDir dir("image-binary", std::nullopt);
  const auto host = run_command("strip --strip-unneeded -o " + dir.path() + "/pgoutbox " + PGOUTBOX_BINARY +
                                " && sha256sum < " + dir.path() + "/pgoutbox");
  const auto in_image =
      podman("run --rm --network none --entrypoint sh " + kImage + " -c 'sha256sum < /usr/local/bin/pgoutbox'");
  ASSERT_EQ(host.status, 0) << host.output;
  EXPECT_EQ(in_image.output, host.output);

  const auto config =
      podman("image inspect --format '{{.Config.User}} {{json .Config.Entrypoint}} {{json .Config.Cmd}}' " + kImage);
  ASSERT_EQ(config.status, 0) << config.output;
  EXPECT_EQ(config.output, "10001:10001 [\"pgoutbox\"] [\"run\",\"-c\",\"/etc/pgoutbox/pgoutbox.yaml\"]\n");
}

// The runtime stage holds the packages the binary's libraries come from and nothing to build with.
TEST_F(ContainerImage, TheRuntimeStageHasNoCompilerAndNoDevelopmentPackage) {
  const auto packages = podman("run --rm --network none --entrypoint dpkg-query " + kImage + " -W -f '${Package}\\n'");
  ASSERT_EQ(packages.status, 0) << packages.output;
  EXPECT_TRUE(has(packages.output, "\nlibpq5\n")) << packages.output;
  EXPECT_FALSE(std::regex_search(packages.output, std::regex(R"((^|\n)[^\n]*-dev\n)"))) << packages.output;
  // gcc-12-base (the runtime libraries' common files) is in every Debian; a compiler is not.
  EXPECT_FALSE(std::regex_search(packages.output,
                                 std::regex(R"((^|\n)(gcc|g\+\+|cpp|clang|cmake|make|build-essential)(-[0-9]+)?\n)")))
      << packages.output;
}

// No file in the image is setuid or setgid. Debian's base ships su, passwd, chsh, mount, newgrp,
// unix_chkpwd... so a process that got a shell in a container run without no-new-privileges (the
// chart sets it; `docker run` and `podman run` do not) could run them as root or as group shadow.
// find runs as root so that no directory is unreadable to it.
TEST_F(ContainerImage, NoFileIsSetuidOrSetgid) {
  const auto found =
      podman("run --rm --network none --user 0 --entrypoint find " + kImage + " / -xdev -type f -perm /6000");
  EXPECT_EQ(found.status, 0) << found.output;
  EXPECT_EQ(found.output, "") << "setuid or setgid files in the image:\n" << found.output;
}

TEST_F(ContainerImage, ChecksStreamsAndStopsCleanlyAsNonRootOnAReadOnlyRoot) {
  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();
  ScratchDir dir("image-test", std::nullopt);
  const std::string name = "img_outbox";
  // An outbox table with its publication, as sql/ creates them, and its topic.
  pg.exec("CREATE TABLE " + name +
          " (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text NOT NULL, aggregateid text NOT NULL, "
          "type text, payload jsonb)");
  pg.exec("CREATE PUBLICATION " + name + "_pub FOR TABLE " + name + " WITH (publish = 'insert')");
  create_topic(kafka.bootstrap(), name + ".events", 3);
  auto cfg = pipeline_config(pg.dsn(), kafka.bootstrap(), name);
  cfg.create_publication = false;
  cfg.tables.front().topic = name + ".events";
  cfg.log_format = "text";
  const auto config = write_pgoutbox_config(dir.path() + "/pgoutbox.yaml", cfg);
  ASSERT_EQ(::chmod(config.c_str(), 0644), 0);  // read by uid 10001 in the container

  // What the Helm chart's securityContext asks of Kubernetes; no tmpfs on /tmp either (the chart
  // mounts none).
  const std::string container = "pgoutbox-image-test-" + std::to_string(::getpid());
  const std::string run_options =
      "--rm --network host --read-only --read-only-tmpfs=false --cap-drop=ALL "
      "--security-opt no-new-privileges -v " +
      config + ":/etc/pgoutbox/pgoutbox.yaml:ro ";

  const auto check = podman("run " + run_options + kImage + " check -c /etc/pgoutbox/pgoutbox.yaml --kafka-timeout 10");
  std::printf("OPS check in the container:\n%s", check.output.c_str());
  EXPECT_EQ(check.status, 0) << check.output;
  EXPECT_FALSE(has(check.output, "FAIL")) << check.output;
  EXPECT_TRUE(has(check.output, "ready: ")) << check.output;

  // The image's default command (run -c /etc/pgoutbox/pgoutbox.yaml), in the foreground.
  const std::string log_path = dir.path() + "/container.log";
  // ChildProcess takes argv whole: the options go in as words.
  std::vector<std::string> argv = {"/bin/bash", kRoot + "/scripts/image.sh", "podman", "run", "--name", container};
  std::istringstream words(run_options);
  for (std::string w; words >> w;) argv.push_back(w);
  argv.push_back(kImage);
  const ContainerRemover remover(container);
  ChildProcess relay({.argv = argv, .log_path = log_path, .run_as = std::nullopt, .extra_env = {}});
  const auto log = [&] { return file_text(log_path); };

  const auto slot_active = [&] {
    return pg.query_value("SELECT active FROM pg_replication_slots WHERE slot_name = '" + name + "_slot'") == "t";
  };
  ASSERT_TRUE(eventually(slot_active, 60s)) << "the container never streamed from the slot:\n" << log();

  // The process in the container as the host's /proc shows it: its user, group and capabilities.
  const auto pid = podman("inspect --format '{{.State.Pid}}' " + container);
  ASSERT_EQ(pid.status, 0) << pid.output;
  const std::string proc = "/proc/" + pid.output.substr(0, pid.output.find('\n'));
  const auto status = file_text(proc + "/status");
  EXPECT_TRUE(has(file_text(proc + "/cmdline"), "pgoutbox")) << file_text(proc + "/cmdline");
  EXPECT_EQ(status_field(status, "Uid:"), "\t10001\t10001\t10001\t10001") << status;
  EXPECT_EQ(status_field(status, "Gid:"), "\t10001\t10001\t10001\t10001") << status;
  EXPECT_EQ(status_field(status, "CapEff:"), "\t0000000000000000") << status;
  // A write anywhere, /tmp included, fails: the root file system is read-only.
  const auto write = podman("exec " + container + " sh -c 'id -u; touch /tmp/probe || touch /probe'");
  EXPECT_NE(write.status, 0) << write.output;
  EXPECT_TRUE(has(write.output, "10001\n")) << write.output;
  EXPECT_TRUE(has(write.output, "Read-only file system")) << write.output;

  constexpr int kRows = 100;
  pg.exec("INSERT INTO " + name + " (aggregatetype, aggregateid, type, payload) SELECT 'order', 'k' || g, 'Placed', " +
          "jsonb_build_object('n', g) FROM generate_series(1, " + std::to_string(kRows) + ") g");
  const auto last_commit = *Lsn::parse(*pg.query_value("SELECT pg_current_wal_lsn()"));
  const auto records = read_topic(kafka.bootstrap(), name + ".events", kRows, 60s);
  EXPECT_EQ(records.size(), static_cast<std::size_t>(kRows)) << log();
  std::set<std::string> keys;
  for (const auto& r : records) keys.insert(r.key.value_or(""));
  EXPECT_EQ(keys.size(), static_cast<std::size_t>(kRows));

  // SIGTERM to the container's PID 1, pgoutbox itself: it drains, confirms and exits 0, and
  // podman run exits with the container's code.
  const auto kill = podman("kill --signal TERM " + container);
  EXPECT_EQ(kill.status, 0) << kill.output;
  const auto exited = relay.wait(60s);
  ASSERT_TRUE(exited) << "the container did not exit after SIGTERM:\n" << log();
  EXPECT_TRUE(WIFEXITED(*exited) && WEXITSTATUS(*exited) == 0) << "status " << *exited << "\n" << log();
  const auto confirmed = Lsn::parse(
      *pg.query_value("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '" + name + "_slot'"));
  ASSERT_TRUE(confirmed);
  EXPECT_GE(*confirmed, Lsn{last_commit.value - 1}) << "the final flush did not reach the slot\n" << log();
  EXPECT_FALSE(slot_active());
  std::printf("OPS the container's log:\n%s", log().c_str());
}

}  // namespace
}  // namespace pgoutbox::test
