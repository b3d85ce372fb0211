// Hostile HTTP clients (issue 19 item 1, SECURITY.md "The metrics port"): with the relay's own
// descriptor limit lowered to 200 and 260 idle connections held open against its metrics port,
// the relay must not spin, must survive a replication reconnect (a fresh Postgres connection
// needs a descriptor) and must keep streaming; once the clients leave, /healthz answers again.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "eventually.h"
#include "fault_fixture.h"
#include "http_get.h"
#include "kafka_client.h"

namespace pgoutbox::test {
namespace {

using namespace std::chrono_literals;

constexpr rlim_t kRelayDescriptorLimit = 200;
constexpr int kIdleClients = 260;

// utime + stime of a process, in clock ticks (/proc/<pid>/stat fields 14 and 15).
std::optional<long> cpu_ticks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 2));
  std::string skip;
  for (int i = 3; i < 14; ++i) fields >> skip;  // state .. cmajflt
  long utime = 0, stime = 0;
  fields >> utime >> stime;
  return utime + stime;
}

// A TCP connection to 127.0.0.1:port that sends nothing; -1 when the connect failed.
int idle_connection(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

class HttpExhaustionTest : public FaultTest {
 protected:
  KafkaBroker& kafka = shared_kafka();
  std::vector<int> clients_;

  void TearDown() override {
    for (const int fd : clients_) ::close(fd);
  }
};

TEST_F(HttpExhaustionTest, IdleClientsCannotStarveTheRelayOfDescriptors) {
  // The test holds 260 sockets of its own.
  rlimit own{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &own), 0);
  if (own.rlim_cur < 1024) {
    own.rlim_cur = std::min<rlim_t>(1024, own.rlim_max);
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &own), 0);
  }

  const auto p = make_pipeline("sec_http", {"E"});
  create_topic(kafka.bootstrap(), p.topics().front(), 1);
  const int port = free_loopback_port();
  auto config = config_for(p, kafka.bootstrap());
  config.extra_yaml =
      "metrics_address: \"127.0.0.1:" + std::to_string(port) + "\"\nreconnect:\n  min: 100ms\n  max: 1s\n";
  auto relay = start_pgoutbox(write_config("sec_http.yaml", config));
  ASSERT_TRUE(wait_streaming(p, *relay)) << log_tail();
  PGOUTBOX_ASSERT_EVENTUALLY(http_get("127.0.0.1", port, "/healthz").status == 200, 30s);

  // The relay's own limit, lowered while it runs.
  const rlimit lowered{kRelayDescriptorLimit, kRelayDescriptorLimit};
  ASSERT_EQ(::prlimit(relay->pid(), RLIMIT_NOFILE, &lowered, nullptr), 0) << std::strerror(errno);

  for (int i = 0; i < kIdleClients; ++i) {
    const int fd = idle_connection(port);
    ASSERT_GE(fd, 0) << "connect " << i << ": " << std::strerror(errno);
    clients_.push_back(fd);
  }
  std::this_thread::sleep_for(500ms);  // let the server accept what it will

  // No busy accept loop: over 3 s the whole process uses well under half a core.
  const auto ticks_before = cpu_ticks(relay->pid());
  std::this_thread::sleep_for(3s);
  const auto ticks_after = cpu_ticks(relay->pid());
  ASSERT_TRUE(ticks_before && ticks_after);
  const double core_share =
      static_cast<double>(*ticks_after - *ticks_before) / static_cast<double>(::sysconf(_SC_CLK_TCK)) / 3.0;
  EXPECT_LT(core_share, 0.3) << "the relay spins while clients hold the metrics port";

  // A replication reconnect now needs a descriptor: end the walsender and write events.
  pg.exec("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '" + p.slot + "'");
  pg.exec("INSERT INTO " + p.table +
          " (id, aggregatetype, aggregateid, type, payload) SELECT 'h' || g, 'E', 'k' || g, 'Created', '{}' "
          "FROM generate_series(1, 50) g");
  const auto records = read_topic(kafka.bootstrap(), p.topics().front(), 50, 60s);
  EXPECT_EQ(records.size(), 50U) << log_tail();
  EXPECT_TRUE(relay->running()) << log_tail();
  const auto log = log_tail();
  EXPECT_EQ(log.find("terminate called"), std::string::npos) << log;

  // The clients leave; the port answers again.
  for (const int fd : clients_) ::close(fd);
  clients_.clear();
  PGOUTBOX_EXPECT_EVENTUALLY(http_get("127.0.0.1", port, "/healthz").status == 200, 30s);
  EXPECT_TRUE(relay->running());
  Figures("http_exhaustion")
      .add("descriptor_limit", static_cast<double>(kRelayDescriptorLimit))
      .add("idle_clients", kIdleClients)
      .add("core_share", core_share)
      .add("records", static_cast<double>(records.size()));
}

}  // namespace
}  // namespace pgoutbox::test
