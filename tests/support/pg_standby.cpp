#include "pg_standby.h"

#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "eventually.h"

namespace pgoutbox::test {
namespace {

void run_shell(const std::string& command) {
  if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
}

}  // namespace

std::unique_ptr<PgCluster> make_standby(const PgCluster& primary, const std::string& physical_slot,
                                        std::map<std::string, std::string> settings) {
  if (!primary.query_value("SELECT 1 FROM pg_replication_slots WHERE slot_name = '" + physical_slot + "'")) {
    primary.exec("SELECT pg_create_physical_replication_slot('" + physical_slot + "', true)");
  }
  settings.emplace("hot_standby", "on");
  settings["primary_slot_name"] = physical_slot;
  settings["primary_conninfo"] = "host=127.0.0.1 port=" + std::to_string(primary.port()) +
                                 " user=postgres dbname=postgres application_name=standby";
  // A cluster of its own (port, scratch directory), its data directory replaced by the copy.
  auto standby = std::make_unique<PgCluster>(std::move(settings));
  rebase_standby(primary, *standby);
  return standby;
}

void rebase_standby(const PgCluster& primary, PgCluster& standby) {
  standby.stop();
  auto session = primary.connect();
  exec_on(session.get(), "SELECT pg_backup_start('pgoutbox test standby', true)");
  const std::string to = standby.data_dir();
  run_shell("find " + to + " -mindepth 1 -delete && cp -a " + primary.data_dir() + "/. " + to + "/ && rm -f " + to +
            "/postmaster.pid " + to + "/postmaster.opts && find " + to + "/pg_wal " + to +
            "/pg_replslot -mindepth 1 -delete && mkdir -p " + to + "/pg_wal/archive_status");
  std::unique_ptr<PGresult, decltype(&PQclear)> stop(
      PQexec(session.get(), "SELECT labelfile FROM pg_backup_stop(true)"), &PQclear);
  if (PQresultStatus(stop.get()) != PGRES_TUPLES_OK) {
    throw std::runtime_error(std::string("pg_backup_stop: ") + PQerrorMessage(session.get()));
  }
  std::ofstream(to + "/backup_label") << PQgetvalue(stop.get(), 0, 0);
  std::ofstream(to + "/standby.signal");
  if (const auto account = service_account()) {
    run_shell("chown -R " + std::to_string(account->uid) + ":" + std::to_string(account->gid) + " " + to);
  }
  standby.start();
  if (standby.query_value("SELECT pg_is_in_recovery()") != "t")
    throw std::runtime_error("the standby is not in recovery");
}

void wait_replayed(const PgCluster& primary, const PgCluster& standby) {
  const auto target = primary.query_value("SELECT pg_current_wal_lsn()").value_or("0/0");
  if (!eventually(
          [&] {
            return standby.query_value("SELECT pg_last_wal_replay_lsn() >= '" + target + "'::pg_lsn").value_or("f") ==
                   "t";
          },
          std::chrono::seconds(60), std::chrono::milliseconds(50))) {
    throw std::runtime_error("the standby did not replay up to " + target + " within 60 s");
  }
}

}  // namespace pgoutbox::test
