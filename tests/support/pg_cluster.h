#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "child_process.h"

namespace pgoutbox::test {

struct PgConnDeleter {
  void operator()(PGconn* conn) const { PQfinish(conn); }
};
using PgConnPtr = std::unique_ptr<PGconn, PgConnDeleter>;

// The major version PGOUTBOX_TEST_PG_MAJOR asks for ("14", "16", …), or "" for the system's.
std::string requested_pg_major();

// A throwaway PostgreSQL cluster for tests: initdb into a scratch directory, a free port on
// 127.0.0.1, wal_level=logical, fsync on. The system's server (Debian's 15) unless
// PGOUTBOX_TEST_PG_MAJOR names another major that scripts/setup.sh installed. Runs the server as
// an unprivileged account when the tests run as root. Can be stopped, crashed, frozen and
// restarted mid-test.
class PgCluster {
 public:
  enum class Stop { smart, fast, immediate };

  // `settings` are extra postgresql.conf lines (name → value), applied at every start. `hba`,
  // when given, is the whole pg_hba.conf instead of trust for every loopback connection.
  explicit PgCluster(std::map<std::string, std::string> settings = {}, const std::string& hba = {});
  ~PgCluster();
  PgCluster(const PgCluster&) = delete;
  PgCluster& operator=(const PgCluster&) = delete;

  void start();
  void stop(Stop mode = Stop::fast);
  void kill9();   // the whole server dies at once, like a crash
  void pause();   // SIGSTOP to every server process
  void resume();  // SIGCONT
  void restart(Stop mode = Stop::fast) {
    stop(mode);
    start();
  }
  bool running();

  // Sets one postgresql.conf line for the next start (the settings are given on the command
  // line, so ALTER SYSTEM cannot override them).
  void set_setting(const std::string& name, const std::string& value) { settings_[name] = value; }

  int port() const { return port_; }
  // The server's major version (PG_VERSION of the data directory: 14, 15, …).
  int server_major() const { return server_major_; }
  const std::string& data_dir() const { return data_dir_; }
  const std::string& log_path() const { return log_path_; }
  // libpq conninfo for the superuser "postgres" on `dbname`.
  std::string dsn(const std::string& dbname = "postgres") const;

  PgConnPtr connect(const std::string& dbname = "postgres") const;
  // Runs SQL (one or more statements) and throws with the server's message on failure.
  void exec(const std::string& sql, const std::string& dbname = "postgres") const;
  // The first column of the first row, or nullopt for no row / NULL.
  std::optional<std::string> query_value(const std::string& sql, const std::string& dbname = "postgres") const;
  std::vector<std::vector<std::optional<std::string>>> query(const std::string& sql,
                                                             const std::string& dbname = "postgres") const;
  // Drops a replication slot if it exists, retrying while a just-closed session's walsender
  // still holds it; false when it stayed active for `timeout`.
  bool drop_slot_when_free(const std::string& slot, std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;

 private:
  void wait_ready(std::chrono::seconds timeout);
  void wait_shared_memory_released();
  static int read_major(const std::string& pg_version_file);
  std::optional<RunAs> account_;
  ScratchDir scratch_;
  std::string data_dir_;
  std::string log_path_;
  std::string bindir_;
  int port_;
  int server_major_ = 0;
  std::map<std::string, std::string> settings_;
  ChildProcess server_;
};

// Runs `sql` on `conn`; throws with the server's message on failure.
void exec_on(PGconn* conn, const std::string& sql);

}  // namespace pgoutbox::test
