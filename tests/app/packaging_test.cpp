// docker/: no Docker engine runs here, so what can be checked offline is checked: the compose
// file's structure (services, dependencies, wal_level, KRaft, every mounted file exists, the
// environment is one the real loader accepts, Prometheus scrapes the address pgoutbox serves,
// Grafana's mounts are where its provisioning looks), and the Dockerfile (bookworm stages, a
// non-root runtime user, the command, the runtime packages derived from the libraries the binary
// really loads). ops_container_image_test builds and runs the image itself.
#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "pgoutbox/config/loader.h"
#include "pgoutbox/config/schema.h"

namespace {

namespace fs = std::filesystem;

const fs::path kRoot = PGOUTBOX_SOURCE_DIR;
const fs::path kDocker = kRoot / "docker";

std::string command_output(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  ::pclose(pipe);
  return out;
}

std::string file_text_of(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Compose's "${NAME:-default}" as compose would expand it with NAME unset.
std::string compose_default(const std::string& value) {
  static const std::regex substitution(R"(\$\{[A-Za-z_][A-Za-z0-9_]*:-([^}]*)\})");
  return std::regex_replace(value, substitution, "$1");
}

std::vector<std::string> strings_of(const YAML::Node& node) {
  std::vector<std::string> out;
  if (node.IsSequence()) {
    for (const auto& item : node) out.push_back(item.as<std::string>());
  } else if (node.IsMap()) {
    for (const auto& item : node) out.push_back(item.first.as<std::string>());
  }
  return out;
}

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

struct Mount {
  std::string source;
  std::string target;
};

std::vector<Mount> mounts_of(const YAML::Node& service) {
  std::vector<Mount> out;
  for (const auto& volume : service["volumes"]) {
    const auto text = volume.as<std::string>();
    const auto colon = text.find(':');
    const auto second = text.find(':', colon + 1);
    out.push_back({text.substr(0, colon),
                   text.substr(colon + 1, second == std::string::npos ? std::string::npos : second - colon - 1)});
  }
  return out;
}

class ComposeFile : public ::testing::Test {
 protected:
  YAML::Node compose = YAML::LoadFile((kDocker / "compose.yaml").string());
  YAML::Node services = compose["services"];

  std::map<std::string, std::string> environment_of(const std::string& service) {
    std::map<std::string, std::string> env;
    for (const auto& item : services[service]["environment"]) {
      env[item.first.as<std::string>()] = compose_default(item.second.as<std::string>());
    }
    return env;
  }
};

TEST_F(ComposeFile, HasTheFiveServices) {
  for (const char* name : {"postgres", "kafka", "pgoutbox", "prometheus", "grafana"}) {
    EXPECT_TRUE(services[name].IsMap()) << name;
  }
}

TEST_F(ComposeFile, PostgresIs15WithLogicalWal) {
  EXPECT_EQ(services["postgres"]["image"].as<std::string>(), "postgres:15");
  EXPECT_TRUE(contains(strings_of(services["postgres"]["command"]), "wal_level=logical"));
}

TEST_F(ComposeFile, PostgresInitialisesFromTheSqlFolder) {
  std::set<std::string> sources;
  for (const auto& m : mounts_of(services["postgres"])) {
    if (m.target.rfind("/docker-entrypoint-initdb.d/", 0) == 0) sources.insert(fs::path(m.source).filename().string());
  }
  for (const char* file : {"outbox.sql", "publication.sql", "role.sql", "consumer_log.sql"}) {
    EXPECT_TRUE(sources.count(file)) << file << " is not an init script";
  }
  // sql/role.sql reads the role's password from this variable, and pgoutbox logs in with it.
  EXPECT_EQ(environment_of("postgres").at("PGOUTBOX_ROLE_PASSWORD"),
            environment_of("pgoutbox").at("PGOUTBOX_POSTGRES_PASSWORD"));
}

TEST_F(ComposeFile, KafkaIsASingleKraftNodeOfThePinnedVersion) {
  EXPECT_EQ(services["kafka"]["image"].as<std::string>(), "apache/kafka:4.1.1");
  const auto roles = environment_of("kafka").at("KAFKA_PROCESS_ROLES");
  EXPECT_NE(roles.find("broker"), std::string::npos);
  EXPECT_NE(roles.find("controller"), std::string::npos);
}

TEST_F(ComposeFile, PgoutboxIsBuiltHereAndWaitsForPostgresAndKafka) {
  const auto pgoutbox = services["pgoutbox"];
  const auto deps = strings_of(pgoutbox["depends_on"]);
  EXPECT_TRUE(contains(deps, "postgres"));
  EXPECT_TRUE(contains(deps, "kafka"));
  const fs::path context = kDocker / pgoutbox["build"]["context"].as<std::string>();
  EXPECT_TRUE(fs::is_regular_file(context / pgoutbox["build"]["dockerfile"].as<std::string>()));
  EXPECT_TRUE(fs::is_regular_file(context / "CMakeLists.txt")) << "the build context is not the repository";
}

TEST_F(ComposeFile, EveryMountedPathExistsInTheRepository) {
  std::size_t checked = 0;
  for (const auto& service : services) {
    if (!service.second["volumes"]) continue;
    for (const auto& m : mounts_of(service.second)) {
      if (m.source.empty() || m.source[0] != '.') continue;  // a named volume
      EXPECT_TRUE(fs::exists(kDocker / m.source)) << service.first.as<std::string>() << ": " << m.source;
      ++checked;
    }
  }
  EXPECT_GE(checked, 9U);
}

TEST_F(ComposeFile, PgoutboxEnvironmentIsAcceptedByTheLoader) {
  const auto env = environment_of("pgoutbox");
  std::set<std::string> known;
  for (const auto& key : pgoutbox::config::schema()) known.insert(key.env);
  for (const auto& [name, value] : env) EXPECT_TRUE(known.count(name)) << name << " is not a configuration variable";

  std::string file;
  for (const auto& m : mounts_of(services["pgoutbox"])) {
    if (m.target == "/etc/pgoutbox/pgoutbox.yaml") file = (kDocker / m.source).string();
  }
  ASSERT_FALSE(file.empty()) << "no configuration file mounted at /etc/pgoutbox/pgoutbox.yaml";
  const auto config = pgoutbox::config::load(file, pgoutbox::config::Environment(env));
  EXPECT_NE(config.postgres.dsn.find("host=postgres"), std::string::npos);
  EXPECT_NE(config.postgres.dsn.find("user=pgoutbox"), std::string::npos) << "not the least-privilege role";
  EXPECT_EQ(config.kafka.brokers, "kafka:9092");
  EXPECT_EQ(config.metrics_address, "0.0.0.0:8432");
  EXPECT_FALSE(config.postgres.password.empty());
}

TEST_F(ComposeFile, PrometheusScrapesTheAddressPgoutboxServes) {
  std::string prometheus_file;
  for (const auto& m : mounts_of(services["prometheus"])) {
    if (m.target == "/etc/prometheus/prometheus.yml") prometheus_file = (kDocker / m.source).string();
  }
  ASSERT_FALSE(prometheus_file.empty());
  const auto port = environment_of("pgoutbox").at("PGOUTBOX_METRICS_ADDRESS").substr(8);  // "0.0.0.0:"
  const auto prometheus = YAML::LoadFile(prometheus_file);
  bool found = false;
  for (const auto& job : prometheus["scrape_configs"]) {
    const auto path = job["metrics_path"] ? job["metrics_path"].as<std::string>() : std::string("/metrics");
    for (const auto& target : job["static_configs"][0]["targets"]) {
      found = found || (target.as<std::string>() == "pgoutbox:" + port && path == "/metrics");
    }
  }
  EXPECT_TRUE(found) << "no scrape target pgoutbox:" << port;
}

TEST_F(ComposeFile, GrafanaMountsItsProvisioningWhereItLooks) {
  std::map<std::string, std::string> by_target;
  for (const auto& m : mounts_of(services["grafana"])) by_target[m.target] = m.source;
  ASSERT_EQ(by_target.count("/etc/grafana/provisioning"), 1U);
  ASSERT_EQ(by_target.count("/var/lib/grafana/dashboards"), 1U);
  EXPECT_EQ(fs::path(by_target["/etc/grafana/provisioning"]).lexically_normal(), fs::path("grafana/provisioning"));
  EXPECT_EQ(fs::path(by_target["/var/lib/grafana/dashboards"]).lexically_normal(), fs::path("grafana/dashboards"));
  // The dashboard provider reads the folder the dashboards are mounted on.
  bool provider_matches = false;
  for (const auto& entry : fs::directory_iterator(kDocker / "grafana/provisioning/dashboards")) {
    for (const auto& provider : YAML::LoadFile(entry.path().string())["providers"]) {
      provider_matches =
          provider_matches || provider["options"]["path"].as<std::string>() == "/var/lib/grafana/dashboards";
    }
  }
  EXPECT_TRUE(provider_matches);
}

// The Dockerfile as instructions: continuation lines joined, comments dropped.
std::vector<std::string> dockerfile_instructions() {
  std::ifstream in(kDocker / "Dockerfile");
  std::vector<std::string> out;
  std::string current;
  for (std::string line; std::getline(in, line);) {
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    if (!line.empty() && line.back() == '\\') {
      current += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    out.push_back(current + line);
    current.clear();
  }
  return out;
}

std::vector<std::string> runtime_stage() {
  const auto all = dockerfile_instructions();
  std::vector<std::string> stage;
  for (const auto& i : all) {
    if (i.rfind("FROM ", 0) == 0) stage.clear();
    stage.push_back(i);
  }
  return stage;
}

// The build arguments declared before the first stage, with their defaults.
std::map<std::string, std::string> global_args() {
  std::map<std::string, std::string> args;
  for (const auto& i : dockerfile_instructions()) {
    if (i.rfind("FROM ", 0) == 0) break;
    const auto eq = i.find('=');
    if (i.rfind("ARG ", 0) == 0 && eq != std::string::npos) args[i.substr(4, eq - 4)] = i.substr(eq + 1);
  }
  return args;
}

// Each stage starts from Debian bookworm (by default the registry's; scripts/image.sh passes its
// debootstrapped ones), from an earlier stage, or from nothing (the stage that only carries the
// binary in).
TEST(Dockerfile, EveryStageIsDebianBookwormAnEarlierStageOrEmpty) {
  const auto args = global_args();
  std::set<std::string> stages;
  std::vector<std::string> bases;
  for (const auto& i : dockerfile_instructions()) {
    if (i.rfind("FROM ", 0) != 0) continue;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(i, m, std::regex(R"(FROM (\S+) AS (\S+))"))) << i;
    std::string base = m[1];
    if (std::regex_match(base, m, std::regex(R"(\$\{(\w+)\})"))) {
      ASSERT_TRUE(args.count(m[1])) << i << ": no default for " << m[1];
      base = args.at(m[1]);
    }
    EXPECT_TRUE(base.rfind("debian:bookworm", 0) == 0 || base == "scratch" || stages.count(base)) << i;
    stages.insert(i.substr(i.rfind(' ') + 1));
    bases.push_back(base);
  }
  ASSERT_FALSE(bases.empty());
  EXPECT_EQ(bases.back(), "debian:bookworm-slim") << "the runtime stage";
  EXPECT_EQ(bases.front(), "debian:bookworm") << "the build stage";
  EXPECT_EQ(args.count("BINARY"), 1U);
  EXPECT_EQ(args.at("BINARY"), "source") << "a plain `docker build` compiles from source";
}

TEST(Dockerfile, TheRuntimeStageRunsAsANonRootUser) {
  std::string user;
  for (const auto& i : runtime_stage()) {
    if (i.rfind("USER ", 0) == 0) user = i.substr(5);
  }
  ASSERT_FALSE(user.empty()) << "the runtime stage sets no USER: it would run as root";
  const auto name = user.substr(0, user.find(':'));
  EXPECT_NE(name, "root");
  EXPECT_NE(name, "0");
}

TEST(Dockerfile, RunsPgoutboxRunWithTheConfigurationFile) {
  std::string entrypoint;
  std::string cmd;
  for (const auto& i : runtime_stage()) {
    if (i.rfind("ENTRYPOINT ", 0) == 0) entrypoint = i.substr(11);
    if (i.rfind("CMD ", 0) == 0) cmd = i.substr(4);
  }
  EXPECT_EQ(entrypoint, R"(["pgoutbox"])");
  EXPECT_EQ(cmd, R"(["run", "-c", "/etc/pgoutbox/pgoutbox.yaml"])");
}

TEST(Dockerfile, EverythingItCopiesFromTheContextExists) {
  std::size_t copies = 0;
  for (const auto& i : dockerfile_instructions()) {
    if (i.rfind("COPY ", 0) != 0 || i.find("--from=") != std::string::npos) continue;
    std::istringstream words(i.substr(5));
    std::vector<std::string> parts;
    for (std::string w; words >> w;) parts.push_back(w);
    for (std::size_t p = 0; p + 1 < parts.size(); ++p) {
      // build/image/ is scripts/image.sh's: it puts the binary and its package list there.
      if (parts[p].rfind("build/image/", 0) == 0) {
        EXPECT_NE(file_text_of(kRoot / "scripts/image.sh").find(" " + parts[p]), std::string::npos) << parts[p];
        continue;
      }
      EXPECT_TRUE(fs::exists(kRoot / parts[p])) << parts[p];
      ++copies;
    }
  }
  EXPECT_GE(copies, 7U);
}

// The runtime stage installs the list docker/runtime-packages.sh derives from the binary, in
// both ways the binary gets there.
TEST(Dockerfile, TheRuntimeStageInstallsThePackagesDerivedFromTheBinary) {
  bool installs = false;
  for (const auto& i : runtime_stage()) {
    installs =
        installs || (i.rfind("RUN ", 0) == 0 && i.find("xargs apt-get install -y --no-install-recommends < "
                                                       "/usr/share/pgoutbox/runtime-packages") != std::string::npos);
  }
  EXPECT_TRUE(installs) << "the runtime stage does not install /usr/share/pgoutbox/runtime-packages";
  bool derives = false;
  for (const auto& i : dockerfile_instructions()) {
    derives =
        derives || i.find("sh docker/runtime-packages.sh /out/pgoutbox > /out/runtime-packages") != std::string::npos;
  }
  EXPECT_TRUE(derives) << "the source stage does not derive the list";
  EXPECT_NE(file_text_of(kRoot / "scripts/image.sh")
                .find("sh docker/runtime-packages.sh \"$binary\" > build/image/runtime-packages"),
            std::string::npos)
      << "scripts/image.sh does not derive the list";
}

// A library that no Debian package owns (one from a project-local prefix) fails the list, naming
// it, instead of an image that cannot start. A stand-in ldd reports one.
TEST(Dockerfile, ALibraryNoPackageOwnsFailsThePackageList) {
  const fs::path dir = fs::temp_directory_path() / ("pgoutbox-ldd-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "ldd") << "#!/bin/sh\n"
                             << "echo '\tlinux-vdso.so.1 (0x00007ffc00000000)'\n"
                             << "echo '\tlibpq.so.5 => /lib/x86_64-linux-gnu/libpq.so.5 (0x00007f0000000000)'\n"
                             << "echo '\tlibrdkafka.so.1 => /opt/nowhere/lib/librdkafka.so.1 (0x00007f0000100000)'\n";
  fs::permissions(dir / "ldd", fs::perms::owner_all);
  const auto out = command_output("PATH=" + dir.string() + ":$PATH sh " + (kDocker / "runtime-packages.sh").string() +
                                  " " + PGOUTBOX_BINARY + " 2>&1; echo \"exit=$?\"");
  fs::remove_all(dir);
  EXPECT_NE(out.find("no Debian package owns /opt/nowhere/lib/librdkafka.so.1"), std::string::npos) << out;
  EXPECT_NE(out.find("exit=1"), std::string::npos) << out;
}

// Every shared library the built binary loads comes from a package docker/runtime-packages.sh
// lists (or one those pull in), so the image starts. Needs dpkg and apt-cache (Debian, like the
// image). The same question asked independently: ldd's paths through one dpkg -S here.
TEST(Dockerfile, ThePackageListCoversTheLibrariesTheBinaryLoads) {
  if (command_output("command -v dpkg >/dev/null && command -v apt-cache >/dev/null && echo yes") != "yes\n") {
    GTEST_SKIP() << "dpkg and apt-cache are needed";
  }
  std::vector<std::string> installed;
  std::istringstream packages(
      command_output("sh " + (kDocker / "runtime-packages.sh").string() + " " + PGOUTBOX_BINARY + " || echo FAILED"));
  for (std::string p; std::getline(packages, p);) installed.push_back(p);
  ASSERT_FALSE(installed.empty());
  ASSERT_EQ(std::count(installed.begin(), installed.end(), "FAILED"), 0);
  EXPECT_EQ(std::count(installed.begin(), installed.end(), "ca-certificates"), 1);
  EXPECT_EQ(std::count(installed.begin(), installed.end(), "libpq5"), 1);
  std::string list;
  for (const auto& p : installed) list += " " + p;
  std::set<std::string> closure;
  std::istringstream deps(
      command_output("apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts "
                     "--no-breaks --no-replaces --no-enhances" +
                     list + " 2>/dev/null"));
  for (std::string line; std::getline(deps, line);) {
    if (!line.empty() && line[0] != ' ') closure.insert(line.substr(0, line.find(':')));
  }
  // Essential in every Debian image, bookworm-slim included.
  for (const char* base : {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}) closure.insert(base);

  // dpkg records a library under the path it shipped it at: /lib/… or /usr/lib/… (merged /usr).
  std::vector<std::pair<std::string, std::vector<std::string>>> libraries;  // name, candidate paths
  std::string paths;
  std::istringstream ldd(command_output(std::string("ldd ") + PGOUTBOX_BINARY));
  for (std::string line; std::getline(ldd, line);) {
    const auto arrow = line.find("=> /");
    if (arrow == std::string::npos) continue;
    const std::string listed = line.substr(arrow + 3, line.find(" (", arrow) - arrow - 3);
    const std::string real = fs::canonical(listed).string();
    if (fs::path(real).filename().string().find("san") != std::string::npos) continue;  // sanitizer runtimes
    std::vector<std::string> candidates = {listed, real};
    if (real.rfind("/usr/", 0) == 0) candidates.push_back(real.substr(4));
    for (const auto& c : candidates) paths += " " + c;
    libraries.push_back({listed, candidates});
  }
  std::map<std::string, std::string> owner;  // path -> package
  std::istringstream owners(command_output("dpkg -S" + paths + " 2>/dev/null"));
  for (std::string line; std::getline(owners, line);) {
    const auto sep = line.find(": ");
    if (sep == std::string::npos) continue;
    const auto package = line.substr(0, line.find_first_of(":,"));
    owner.emplace(line.substr(sep + 2), package);
  }
  for (const auto& [name, candidates] : libraries) {
    std::string package;
    for (const auto& c : candidates) {
      if (owner.count(c)) package = owner[c];
    }
    EXPECT_TRUE(closure.count(package)) << name << " comes from '" << package << "', which the runtime stage lacks";
  }
  EXPECT_GE(libraries.size(), 5U);
}

}  // namespace
