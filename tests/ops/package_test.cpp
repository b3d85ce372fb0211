// The Debian package, built here by cpack from this build tree: its control data and contents,
// lintian without errors, and the binary it installs (unpacked into a scratch root with dpkg -x)
// answering --version and `check` against the test's real Postgres and Kafka; its postinst run
// for real in a throwaway copy-on-write view of this host; its units are the ones deploy/systemd
// holds (systemd_unit_test checks those).
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "command.h"
#include "services.h"

namespace pgoutbox::test {
namespace {

const std::string kRoot = PGOUTBOX_SOURCE_DIR;

class DebianPackageTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = new ScratchDir("ops-deb", std::nullopt);
    const auto built = run_command("cd " + std::string(PGOUTBOX_BUILD_DIR) + " && " + PGOUTBOX_CPACK +
                                   " -G DEB --config CPackConfig.cmake -B " + scratch_->path() + "/out");
    ASSERT_EQ(built.status, 0) << built.output;
    deb_ = scratch_->path() + "/out/pgoutbox_" + PGOUTBOX_VERSION + "_amd64.deb";
    ASSERT_EQ(run_command("test -f " + deb_).status, 0) << built.output;
    root_ = scratch_->path() + "/root";
    const auto unpacked = run_command("dpkg -x " + deb_ + " " + root_);
    ASSERT_EQ(unpacked.status, 0) << unpacked.output;
  }
  static void TearDownTestSuite() {
    delete scratch_;
    scratch_ = nullptr;
  }

  static inline ScratchDir* scratch_ = nullptr;
  static inline std::string deb_;
  static inline std::string root_;
};

TEST_F(DebianPackageTest, ControlData) {
  const auto info = run_command("dpkg-deb --info " + deb_);
  ASSERT_EQ(info.status, 0) << info.output;
  EXPECT_NE(info.output.find("Package: pgoutbox"), std::string::npos) << info.output;
  EXPECT_NE(info.output.find(std::string("Version: ") + PGOUTBOX_VERSION), std::string::npos);
  EXPECT_NE(info.output.find("Architecture: amd64"), std::string::npos);
  // Shared-library dependencies computed by dpkg-shlibdeps, plus adduser for the system user:
  // librdkafka is linked statically, so the libraries it needs are there and librdkafka1 is not.
  for (const char* dep : {"adduser", "libpq5", "libssl3", "libsasl2-2", "libcurl4", "libzstd1", "liblz4-1"}) {
    EXPECT_NE(info.output.find(dep), std::string::npos) << dep << "\n" << info.output;
  }
  EXPECT_EQ(info.output.find("librdkafka"), std::string::npos) << info.output;
  for (const char* script : {"postinst", "prerm", "postrm", "conffiles", "md5sums"}) {
    EXPECT_NE(info.output.find(script), std::string::npos) << script;
  }
  const auto conffiles = run_command("dpkg-deb --ctrl-tarfile " + deb_ + " | tar -xO ./conffiles");
  EXPECT_EQ(conffiles.output, "/etc/default/pgoutbox\n/etc/pgoutbox/pgoutbox.yaml\n");
  const auto postinst = run_command("dpkg-deb --ctrl-tarfile " + deb_ + " | tar -xO ./postinst");
  EXPECT_NE(postinst.output.find("adduser --system"), std::string::npos) << "creates the pgoutbox user";
}

// The field `key=` of the lines a script printed ("" if absent).
std::string field(const std::string& output, const std::string& key) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
  }
  return "";
}

// The maintainer script, run for real as dpkg would after unpacking: in a private mount
// namespace, chrooted into a copy-on-write view of this host's root (overlayfs, its upper layer on
// a tmpfs) with the package unpacked into it and a private /run, so no running systemd is within
// reach. Whatever postinst writes lands in that tmpfs, which goes with the namespace: the host is
// untouched (checked after).
TEST_F(DebianPackageTest, PostinstCreatesTheSystemUserAndGuardsTheSecretFiles) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "running the postinst without touching the host needs root (a mount namespace, overlayfs, chroot)";
  }
  if (run_command("getent passwd pgoutbox").status == 0) {
    GTEST_SKIP() << "this host already has a pgoutbox user: the postinst would not create one";
  }
  const std::string sandbox = scratch_->path() + "/postinst";
  const std::string script = sandbox + ".sh";
  std::ofstream(script) << "set -e\n"
                        << "S='" << sandbox << "'\nDEB='" << deb_ << "'\n"
                        << R"sh(M="$S/merged"
mkdir -p "$S/cow" "$M"
{ mount -t tmpfs tmpfs "$S/cow" && mkdir "$S/cow/up" "$S/cow/work" &&
  mount -t overlay overlay -o "lowerdir=/,upperdir=$S/cow/up,workdir=$S/cow/work" "$M"; } || exit 77
mount --rbind /dev "$M/dev"
mount -t proc proc "$M/proc"
mount -t tmpfs tmpfs "$M/run"
dpkg-deb --fsys-tarfile "$DEB" | tar -x --keep-directory-symlink -C "$M"
dpkg-deb --ctrl-tarfile "$DEB" | tar -xO ./postinst > "$M/tmp/pgoutbox.postinst"
chroot "$M" sh /tmp/pgoutbox.postinst configure
echo "passwd=$(chroot "$M" getent passwd pgoutbox)"
echo "group=$(chroot "$M" getent group pgoutbox)"
echo "yaml=$(chroot "$M" stat -c '%U:%G %a' /etc/pgoutbox/pgoutbox.yaml)"
echo "default=$(chroot "$M" stat -c '%U:%G %a' /etc/default/pgoutbox)"
chroot "$M" sh /tmp/pgoutbox.postinst configure 0.0.1
echo "upgraded=$(chroot "$M" getent passwd pgoutbox)"
)sh";
  const auto ran = run_command("unshare --mount --propagation private sh " + script);
  std::printf("OPS postinst in a sandbox:\n%s", ran.output.c_str());
  if (ran.status == 77 || ran.output.find("unshare failed") != std::string::npos) {
    GTEST_SKIP() << "no mount namespace or overlayfs here: " << ran.output;
  }
  ASSERT_EQ(ran.status, 0) << ran.output;

  // A system user with its own group, no home and no login shell.
  const auto passwd = field(ran.output, "passwd");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(passwd, m, std::regex(R"(pgoutbox:x:([0-9]+):([0-9]+):[^:]*:/nonexistent:(.*))")))
      << passwd;
  EXPECT_LT(std::stoi(m[1]), 1000) << "a system uid";
  EXPECT_EQ(m[3], "/usr/sbin/nologin");
  EXPECT_EQ(field(ran.output, "group").rfind("pgoutbox:x:" + m[2].str() + ":", 0), 0U) << field(ran.output, "group");
  // The files that may hold passwords are readable by the service and root only.
  EXPECT_EQ(field(ran.output, "yaml"), "root:pgoutbox 640");
  EXPECT_EQ(field(ran.output, "default"), "root:pgoutbox 640");
  // Configuring again (an upgrade) keeps the user as it was.
  EXPECT_EQ(field(ran.output, "upgraded"), passwd);
  // And the host never saw any of it.
  EXPECT_NE(run_command("getent passwd pgoutbox").status, 0) << "the postinst reached the host's /etc";
}

TEST_F(DebianPackageTest, Contents) {
  const auto contents = run_command("dpkg-deb --contents " + deb_);
  ASSERT_EQ(contents.status, 0) << contents.output;
  for (const char* path : {"./usr/bin/pgoutbox", "./etc/pgoutbox/pgoutbox.yaml", "./etc/default/pgoutbox",
                           "./lib/systemd/system/pgoutbox.service", "./lib/systemd/system/pgoutbox@.service",
                           "./usr/share/pgoutbox/sql/outbox.sql", "./usr/share/pgoutbox/sql/role.sql",
                           "./usr/share/pgoutbox/prometheus/alerts.yaml", "./usr/share/man/man1/pgoutbox.1.gz",
                           "./usr/share/doc/pgoutbox/copyright", "./usr/share/doc/pgoutbox/changelog.gz",
                           "./usr/share/doc/pgoutbox/runbook.md", "./usr/share/doc/pgoutbox/README.md",
                           "./usr/share/doc/pgoutbox/librdkafka-LICENSES.txt"}) {
    EXPECT_TRUE(std::regex_search(contents.output, std::regex(std::string(" ") + path + "\n"))) << path << "\n"
                                                                                                << contents.output;
  }
  // Owned by root, nothing world-writable, the binary executable.
  EXPECT_TRUE(
      std::regex_search(contents.output, std::regex(R"(-rwxr-xr-x root/root +[0-9]+ .* \./usr/bin/pgoutbox\n)")));
  EXPECT_FALSE(std::regex_search(contents.output, std::regex(R"((^|\n)[-dl].{7}w)"))) << "world-writable file";
  EXPECT_FALSE(std::regex_search(contents.output, std::regex(R"((^|\n)\S+ (?!root/root))")))
      << "a file not owned by root";
  // The installed files are the repository's.
  for (const auto& [installed, source] : std::vector<std::pair<std::string, std::string>>{
           {"/lib/systemd/system/pgoutbox.service", "/deploy/systemd/pgoutbox.service"},
           {"/lib/systemd/system/pgoutbox@.service", "/deploy/systemd/pgoutbox@.service"},
           {"/etc/pgoutbox/pgoutbox.yaml", "/config/pgoutbox.example.yaml"},
           {"/usr/share/pgoutbox/prometheus/alerts.yaml", "/deploy/prometheus/alerts.yaml"}}) {
    EXPECT_EQ(file_text(root_ + installed), file_text(kRoot + source)) << installed;
  }
}

TEST_F(DebianPackageTest, LintianFindsNoError) {
  const auto lintian = run_command("lintian --tag-display-limit 0 " + deb_);
  std::printf("OPS lintian:\n%s", lintian.output.c_str());
  std::istringstream lines(lintian.output);
  for (std::string line; std::getline(lines, line);) EXPECT_NE(line.rfind("E: ", 0), 0U) << line;
  EXPECT_EQ(lintian.status, 0) << lintian.output;
}

TEST_F(DebianPackageTest, ManPageIsGeneratedFromTheHelp) {
  const auto man = run_command("MANWIDTH=200 man -l " + root_ + "/usr/share/man/man1/pgoutbox.1.gz | cat");
  ASSERT_EQ(man.status, 0) << man.output;
  for (const char* text : {"rows from PostgreSQL to Kafka", "run", "check", "status", "slot",
                           "Exit codes:", "/etc/pgoutbox/pgoutbox.yaml"}) {
    EXPECT_NE(man.output.find(text), std::string::npos) << text << "\n" << man.output;
  }
}

TEST_F(DebianPackageTest, InstalledBinaryRunsVersionAndCheck) {
  const std::string binary = root_ + "/usr/bin/pgoutbox";
  const auto version = run_command(binary + " --version");
  EXPECT_EQ(version.status, 0);
  EXPECT_EQ(version.output,
            std::string("pgoutbox ") + PGOUTBOX_VERSION + "\nlibrdkafka " + rd_kafka_version_str() + "\n");

  PgCluster& pg = shared_postgres();
  KafkaBroker& kafka = shared_kafka();
  // The installed SQL scripts create the outbox table and the publication the installed
  // example configuration names; only the addresses come from the environment, as
  // /etc/default/pgoutbox would give them.
  pg.exec("DROP PUBLICATION IF EXISTS pgoutbox");
  pg.exec(file_text(root_ + "/usr/share/pgoutbox/sql/outbox.sql"));
  pg.exec(file_text(root_ + "/usr/share/pgoutbox/sql/publication.sql"));
  const auto check =
      run_command("PGOUTBOX_POSTGRES_DSN='" + pg.dsn() + "' PGOUTBOX_KAFKA_BROKERS=" + kafka.bootstrap() + " " +
                  binary + " check -c " + root_ + "/etc/pgoutbox/pgoutbox.yaml");
  std::printf("OPS check with the installed binary:\n%s", check.output.c_str());
  EXPECT_NE(check.output.find("ok"), std::string::npos) << check.output;
  EXPECT_EQ(check.output.find("FAIL"), std::string::npos) << check.output;
  EXPECT_EQ(check.status, 0) << check.output;
}

}  // namespace
}  // namespace pgoutbox::test
