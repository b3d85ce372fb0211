#pragma once

// The ceiling every benchmark compares against: pg_recvlogical draining a slot to /dev/null
// up to an end position (the rate at which Postgres can hand out the changes at all).

#include <sys/wait.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "child_process.h"
#include "pg_cluster.h"
#include "pgoutbox/lsn.h"

namespace pgoutbox::bench {

// Seconds pg_recvlogical took to read `slot` from its confirmed position to `end`, connecting
// with `dsn`.
inline double drain_with_pg_recvlogical(const std::string& dsn, const std::string& slot, const std::string& publication,
                                        Lsn end, int proto_version) {
  const auto t0 = std::chrono::steady_clock::now();
  test::ChildProcess child(
      {.argv = {std::string(PGOUTBOX_PG_BINDIR) + "/pg_recvlogical", "-d", dsn, "--slot", slot, "--start", "-f",
                "/dev/null", "--endpos", end.to_string(), "-o", "proto_version=" + std::to_string(proto_version), "-o",
                "publication_names=" + publication, "-o", "messages=true", "--no-loop"},
       .log_path = "/tmp/pgoutbox-bench-recvlogical.log",
       .run_as = std::nullopt,
       .extra_env = {}});
  const auto status = child.wait(std::chrono::minutes(30));
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    throw std::runtime_error("pg_recvlogical failed: " + test::tail_of("/tmp/pgoutbox-bench-recvlogical.log"));
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline double drain_with_pg_recvlogical(const test::PgCluster& pg, const std::string& slot,
                                        const std::string& publication, Lsn end, int proto_version) {
  return drain_with_pg_recvlogical(pg.dsn(), slot, publication, end, proto_version);
}

}  // namespace pgoutbox::bench
