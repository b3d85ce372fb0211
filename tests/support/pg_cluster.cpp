#include "pg_cluster.h"

#include <signal.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "eventually.h"

namespace pgoutbox::test {
namespace {

// The server's bin directory: PGOUTBOX_PG_BINDIR wins; else PGOUTBOX_TEST_PG_MAJOR picks one of
// the majors scripts/setup.sh unpacks into .deps/postgres/<major>; else the system's server
// (`pg_config --bindir` at configure time, Debian's 15).
std::string pg_bindir() {
  if (const char* dir = std::getenv("PGOUTBOX_PG_BINDIR"); dir != nullptr && *dir != '\0') return dir;
  const std::string major = requested_pg_major();
  if (major.empty()) return PGOUTBOX_PG_BINDIR;
  const std::string matrix = std::string(PGOUTBOX_PG_MATRIX_DIR) + "/" + major + "/native/bin";
  if (::access((matrix + "/postgres").c_str(), X_OK) == 0) return matrix;
  if (major == PGOUTBOX_PG_SYSTEM_MAJOR) return PGOUTBOX_PG_BINDIR;
  throw std::runtime_error("PGOUTBOX_TEST_PG_MAJOR=" + major + ": no server at " + matrix +
                           " (scripts/setup.sh installs Postgres 14, 16, 17 and 18 there)");
}

struct PgResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResultPtr = std::unique_ptr<PGresult, PgResultDeleter>;

}  // namespace

std::string requested_pg_major() {
  const char* major = std::getenv("PGOUTBOX_TEST_PG_MAJOR");
  return major != nullptr ? major : "";
}

void exec_on(PGconn* conn, const std::string& sql) {
  PgResultPtr res(PQexec(conn, sql.c_str()));
  const auto status = PQresultStatus(res.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    throw std::runtime_error("SQL failed: " + sql.substr(0, 200) + ": " + PQerrorMessage(conn));
  }
}

PgCluster::PgCluster(std::map<std::string, std::string> settings, const std::string& hba_lines)
    : account_(service_account()),
      scratch_("pg", account_),
      data_dir_(scratch_.path() + "/data"),
      log_path_(scratch_.path() + "/postgres.log"),
      bindir_(pg_bindir()),
      port_(free_loopback_port()),
      settings_(std::move(settings)) {
  ChildProcess initdb({.argv = {bindir_ + "/initdb", "-D", data_dir_, "-U", "postgres", "--auth=trust",
                                "--encoding=UTF8", "--locale=C.UTF-8"},
                       .log_path = scratch_.path() + "/initdb.log",
                       .run_as = account_,
                       .extra_env = {}});
  const auto status = initdb.wait(std::chrono::seconds(120));
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    throw std::runtime_error("initdb failed:\n" + tail_of(scratch_.path() + "/initdb.log"));
  }
  // Loopback TCP with trust for the tests' own connections, replication included.
  server_major_ = read_major(data_dir_ + "/PG_VERSION");
  std::ofstream hba(data_dir_ + "/pg_hba.conf", std::ios::trunc);
  if (!hba_lines.empty()) {
    hba << hba_lines;
  } else {
    hba << "local all all trust\n"
           "host all all 127.0.0.1/32 trust\n"
           "host replication all 127.0.0.1/32 trust\n";
  }
  hba.close();
  start();
}

int PgCluster::read_major(const std::string& pg_version_file) {
  std::ifstream in(pg_version_file);
  int major = 0;
  if (!(in >> major)) throw std::runtime_error("cannot read " + pg_version_file);
  return major;
}

PgCluster::~PgCluster() {
  if (running()) {
    server_.signal_leader(SIGQUIT);  // immediate: the cluster is thrown away
    server_.wait(std::chrono::seconds(10));
  }
  server_.kill_and_reap();
}

void PgCluster::start() {
  if (running()) return;
  std::vector<std::string> argv = {bindir_ + "/postgres", "-D", data_dir_};
  std::map<std::string, std::string> conf = {
      {"port", std::to_string(port_)},
      {"listen_addresses", "127.0.0.1"},
      {"unix_socket_directories", scratch_.path()},
      {"wal_level", "logical"},
      {"max_replication_slots", "20"},
      {"max_wal_senders", "20"},
      {"max_connections", "100"},
      {"fsync", "on"},
      {"logging_collector", "off"},
      {"log_min_messages", "warning"},
      {"log_line_prefix", "%m [%p] %q%a "},
  };
  for (const auto& [name, value] : settings_) conf[name] = value;
  for (const auto& [name, value] : conf) {
    argv.push_back("-c");
    argv.push_back(name + "=" + value);
  }
  server_ = ChildProcess({.argv = argv, .log_path = log_path_, .run_as = account_, .extra_env = {}});
  wait_ready(std::chrono::seconds(60));
}

void PgCluster::wait_ready(std::chrono::seconds timeout) {
  const std::string conninfo = dsn();
  const bool ready = eventually(
      [&] {
        if (!server_.running()) throw std::runtime_error("postgres exited during start:\n" + tail_of(log_path_));
        return PQping(conninfo.c_str()) == PQPING_OK;
      },
      timeout);
  if (!ready) throw std::runtime_error("postgres not ready in time:\n" + tail_of(log_path_));
}

void PgCluster::stop(Stop mode) {
  if (!running()) return;
  // Postgres's shutdown modes are signals to the postmaster (see pg_ctl.c).
  const int sig = mode == Stop::smart ? SIGTERM : mode == Stop::fast ? SIGINT : SIGQUIT;
  server_.signal_group(SIGCONT);
  server_.signal_leader(sig);
  if (!server_.wait(std::chrono::seconds(60))) {
    throw std::runtime_error("postgres did not stop in 60 s:\n" + tail_of(log_path_));
  }
  server_.kill_and_reap();  // stray backends of an immediate stop
  wait_shared_memory_released();
}

void PgCluster::kill9() {
  server_.kill_and_reap();
  wait_shared_memory_released();
}

// The backends of a killed server die on their own schedule (later under load, or one in an
// fsync), and a postmaster started before the last of them is gone refuses to run: "pre-existing
// shared memory block is still in use". Waits for what that check looks at, the System V segment
// named on postmaster.pid's seventh line, to have no process attached.
void PgCluster::wait_shared_memory_released() {
  std::ifstream pid_file(data_dir_ + "/postmaster.pid");
  std::string line;
  for (int n = 0; n < 7; ++n) {
    if (!std::getline(pid_file, line)) return;  // a clean shutdown removed the file
  }
  std::istringstream fields(line);
  long key = 0;
  int shmid = -1;
  if (!(fields >> key >> shmid)) return;
  const bool released = eventually(
      [&] {
        shmid_ds segment{};
        return ::shmctl(shmid, IPC_STAT, &segment) != 0 || segment.shm_nattch == 0;
      },
      std::chrono::seconds(30));
  if (!released) throw std::runtime_error("backends of the killed postgres still hold its shared memory after 30 s");
}
void PgCluster::pause() { server_.signal_group(SIGSTOP); }
void PgCluster::resume() { server_.signal_group(SIGCONT); }
bool PgCluster::running() { return server_.running(); }

std::string PgCluster::dsn(const std::string& dbname) const {
  return "host=127.0.0.1 port=" + std::to_string(port_) + " user=postgres dbname=" + dbname;
}

PgConnPtr PgCluster::connect(const std::string& dbname) const {
  PgConnPtr conn(PQconnectdb(dsn(dbname).c_str()));
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    throw std::runtime_error("cannot connect to test postgres: " + std::string(PQerrorMessage(conn.get())));
  }
  return conn;
}

void PgCluster::exec(const std::string& sql, const std::string& dbname) const { exec_on(connect(dbname).get(), sql); }

std::vector<std::vector<std::optional<std::string>>> PgCluster::query(const std::string& sql,
                                                                      const std::string& dbname) const {
  auto conn = connect(dbname);
  PgResultPtr res(PQexec(conn.get(), sql.c_str()));
  if (PQresultStatus(res.get()) != PGRES_TUPLES_OK) {
    throw std::runtime_error("query failed: " + sql.substr(0, 200) + ": " + PQerrorMessage(conn.get()));
  }
  std::vector<std::vector<std::optional<std::string>>> rows;
  for (int r = 0; r < PQntuples(res.get()); ++r) {
    auto& row = rows.emplace_back();
    for (int c = 0; c < PQnfields(res.get()); ++c) {
      if (PQgetisnull(res.get(), r, c)) {
        row.emplace_back(std::nullopt);
      } else {
        row.emplace_back(
            std::string(PQgetvalue(res.get(), r, c), static_cast<std::size_t>(PQgetlength(res.get(), r, c))));
      }
    }
  }
  return rows;
}

bool PgCluster::drop_slot_when_free(const std::string& slot, std::chrono::milliseconds timeout) const {
  return eventually(
      [&] {
        try {
          exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '" + slot + "'");
          return true;
        } catch (const std::exception&) {
          return false;
        }
      },
      timeout);
}

std::optional<std::string> PgCluster::query_value(const std::string& sql, const std::string& dbname) const {
  const auto rows = query(sql, dbname);
  if (rows.empty() || rows.front().empty()) return std::nullopt;
  return rows.front().front();
}

}  // namespace pgoutbox::test
