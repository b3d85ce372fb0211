#include "pgoutbox_process.h"

#include <libpq-fe.h>
#include <sys/wait.h>

#include <memory>
#include <stdexcept>

namespace pgoutbox::test {
namespace {

std::optional<std::string> single_value(const std::string& dsn, const std::string& sql) {
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectdb(dsn.c_str()), &PQfinish);
  if (PQstatus(conn.get()) != CONNECTION_OK)
    throw std::runtime_error("cannot connect: " + std::string(PQerrorMessage(conn.get())));
  std::unique_ptr<PGresult, decltype(&PQclear)> res(PQexec(conn.get(), sql.c_str()), &PQclear);
  if (PQresultStatus(res.get()) != PGRES_TUPLES_OK) throw std::runtime_error("query failed: " + sql);
  if (PQntuples(res.get()) == 0 || PQgetisnull(res.get(), 0, 0)) return std::nullopt;
  return std::string(PQgetvalue(res.get(), 0, 0));
}

std::vector<std::string> with(std::vector<std::string> argv, const std::vector<std::string>& more) {
  argv.insert(argv.end(), more.begin(), more.end());
  return argv;
}

}  // namespace

PgoutboxProcess::PgoutboxProcess(const std::string& binary, const std::string& config_path, const std::string& log_path,
                                 std::vector<std::string> extra_env, const std::vector<std::string>& extra_args)
    : child_({.argv = with(std::vector<std::string>{binary, "run", "-c", config_path}, extra_args),
              .log_path = log_path,
              .run_as = std::nullopt,
              .extra_env = std::move(extra_env)}) {}

std::optional<int> PgoutboxProcess::wait_exit(std::chrono::milliseconds timeout) {
  const auto status = child_.wait(timeout);
  if (!status) return std::nullopt;
  if (WIFEXITED(*status)) return WEXITSTATUS(*status);
  if (WIFSIGNALED(*status)) return -WTERMSIG(*status);
  return std::nullopt;
}

std::optional<std::string> slot_confirmed_lsn(const std::string& dsn, const std::string& slot) {
  return single_value(dsn, "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '" + slot + "'");
}

std::optional<int> slot_active_pid(const std::string& dsn, const std::string& slot) {
  const auto pid = single_value(dsn, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '" + slot + "'");
  if (!pid) return std::nullopt;
  return std::stoi(*pid);
}

}  // namespace pgoutbox::test
