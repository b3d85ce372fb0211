#pragma once

#include <string>
#include <vector>

#include "child_process.h"

namespace pgoutbox::test {

// A throwaway PgBouncer (Debian's, scripts/setup.sh installs it) in front of a test Postgres: its
// own ini in a scratch directory, a free port on 127.0.0.1, trust authentication for `users`
// (PgBouncer's trust still wants each user in its auth_file), the pool mode asked for and the
// startup parameters it should drop rather than refuse (ignore_startup_parameters). Runs in the foreground as the
// unprivileged account when the tests run as root (PgBouncer refuses root), and dies with the test.
class PgBouncer {
 public:
  PgBouncer(int postgres_port, const std::string& pool_mode, const std::string& ignore_startup_parameters = "",
            const std::vector<std::string>& users = {"postgres"});
  ~PgBouncer();
  PgBouncer(const PgBouncer&) = delete;
  PgBouncer& operator=(const PgBouncer&) = delete;

  int port() const { return port_; }
  // libpq conninfo through the pooler for `user` on `dbname`.
  std::string dsn(const std::string& user = "postgres", const std::string& dbname = "postgres") const;

 private:
  ScratchDir scratch_;
  int port_;
  ChildProcess process_;
};

}  // namespace pgoutbox::test
