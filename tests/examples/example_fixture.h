#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "child_process.h"
#include "pg_cluster.h"

namespace pgoutbox::test {

// The examples' binaries and SQL, as the demo uses them.
std::string source_file(const std::string& relative);  // contents of a file of the repository

// Creates database `name` (dropping an old one) and runs the repository's SQL files in it.
void create_database(PgCluster& pg, const std::string& name, const std::vector<std::string>& sql_files);

// NAME=value lines, as stock-consumer writes its --stats-file; empty when not there yet.
std::map<std::string, std::int64_t> read_stats(const std::string& path);
std::int64_t stat_value(const std::string& path, const std::string& name);

std::string read_text(const std::string& path);

// Produces one record and waits for its ack.
void produce(const std::string& bootstrap, const std::string& topic, const std::string& key,
             const std::optional<std::string>& value, const std::vector<std::pair<std::string, std::string>>& headers);

struct Finished {
  int exit_code = -1;  // -1: killed by a signal or did not finish
  std::string output;  // stdout and stderr
};
// Runs a command to its end (or kills it after `timeout`).
Finished run_to_end(const std::vector<std::string>& argv, const std::string& log_path,
                    std::chrono::milliseconds timeout);

// Sends SIGTERM and returns the exit code (-1 when it had to be killed or died of a signal).
int stop_gracefully(ChildProcess& process, std::chrono::milliseconds timeout);

}  // namespace pgoutbox::test
