#include "pgbouncer.h"

#include <libpq-fe.h>
#include <signal.h>

#include <fstream>
#include <stdexcept>

#include "eventually.h"

namespace pgoutbox::test {

PgBouncer::PgBouncer(int postgres_port, const std::string& pool_mode, const std::string& ignore_startup_parameters,
                     const std::vector<std::string>& users)
    : scratch_("pgbouncer", service_account()), port_(free_loopback_port()) {
  const std::string ini = scratch_.path() + "/pgbouncer.ini";
  // Every database of the server; no Unix socket, so only this port is taken.
  std::ofstream(ini) << "[databases]\n* = host=127.0.0.1 port=" << postgres_port << "\n"
                     << "[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = " << port_ << "\n"
                     << "unix_socket_dir =\nauth_type = trust\nauth_file = " << scratch_.path() << "/users.txt\n"
                     << "pool_mode = " << pool_mode << "\n"
                     << "ignore_startup_parameters = " << ignore_startup_parameters << "\n";
  std::ofstream auth(scratch_.path() + "/users.txt");
  for (const auto& user : users) auth << '"' << user << "\" \"\"\n";
  auth.close();
  process_ = ChildProcess({.argv = {PGOUTBOX_PGBOUNCER, ini},
                           .log_path = scratch_.path() + "/pgbouncer.log",
                           .run_as = service_account(),
                           .extra_env = {}});
  const std::string conninfo = dsn() + " connect_timeout=5";
  const bool up = eventually(
      [&] {
        if (!process_.running())
          throw std::runtime_error("pgbouncer exited:\n" + tail_of(scratch_.path() + "/pgbouncer.log"));
        return PQping(conninfo.c_str()) == PQPING_OK;
      },
      std::chrono::seconds(60));
  if (!up) throw std::runtime_error("pgbouncer not ready in time:\n" + tail_of(scratch_.path() + "/pgbouncer.log"));
}

PgBouncer::~PgBouncer() {
  if (process_.running()) {
    process_.signal_leader(SIGINT);  // PgBouncer's immediate shutdown
    process_.wait(std::chrono::seconds(10));
  }
  process_.kill_and_reap();
}

std::string PgBouncer::dsn(const std::string& user, const std::string& dbname) const {
  return "host=127.0.0.1 port=" + std::to_string(port_) + " user=" + user + " dbname=" + dbname;
}

}  // namespace pgoutbox::test
