#include "example_fixture.h"

#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "kafka_client.h"

namespace pgoutbox::test {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string source_file(const std::string& relative) {
  const std::string path = std::string(PGOUTBOX_SOURCE_DIR) + "/" + relative;
  std::ifstream probe(path);
  if (!probe) throw std::runtime_error("missing " + path);
  return read_text(path);
}

void create_database(PgCluster& pg, const std::string& name, const std::vector<std::string>& sql_files) {
  pg.exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
  pg.exec("CREATE DATABASE " + name);
  for (const auto& file : sql_files) pg.exec(source_file(file), name);
}

std::map<std::string, std::int64_t> read_stats(const std::string& path) {
  std::map<std::string, std::int64_t> stats;
  std::istringstream lines(read_text(path));
  std::string line;
  while (std::getline(lines, line)) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) stats[line.substr(0, eq)] = std::stoll(line.substr(eq + 1));
  }
  return stats;
}

std::int64_t stat_value(const std::string& path, const std::string& name) {
  const auto stats = read_stats(path);
  const auto found = stats.find(name);
  return found == stats.end() ? -1 : found->second;
}

void produce(const std::string& bootstrap, const std::string& topic, const std::string& key,
             const std::optional<std::string>& value, const std::vector<std::pair<std::string, std::string>>& headers) {
  auto producer = make_client(RD_KAFKA_PRODUCER, {{"bootstrap.servers", bootstrap}});
  rd_kafka_headers_t* hdrs = rd_kafka_headers_new(headers.size());
  for (const auto& [name, text] : headers)
    rd_kafka_header_add(hdrs, name.c_str(), -1, text.data(), static_cast<ssize_t>(text.size()));
  void* value_data = value ? const_cast<char*>(value->data()) : nullptr;
  const std::size_t value_size = value ? value->size() : 0;
  const auto error = rd_kafka_producev(
      producer.get(), RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_KEY(const_cast<char*>(key.data()), key.size()),
      RD_KAFKA_V_VALUE(value_data, value_size), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(hdrs),
      RD_KAFKA_V_END);
  if (error != RD_KAFKA_RESP_ERR_NO_ERROR) {
    rd_kafka_headers_destroy(hdrs);
    throw std::runtime_error(std::string("produce: ") + rd_kafka_err2str(error));
  }
  if (rd_kafka_flush(producer.get(), 30000) != RD_KAFKA_RESP_ERR_NO_ERROR)
    throw std::runtime_error("produce: no ack in 30 s");
}

Finished run_to_end(const std::vector<std::string>& argv, const std::string& log_path,
                    std::chrono::milliseconds timeout) {
  ChildProcess process({.argv = argv, .log_path = log_path, .run_as = std::nullopt, .extra_env = {}});
  const auto status = process.wait(timeout);
  Finished finished;
  if (status && WIFEXITED(*status)) finished.exit_code = WEXITSTATUS(*status);
  if (!status) process.kill_and_reap();
  finished.output = read_text(log_path);
  return finished;
}

int stop_gracefully(ChildProcess& process, std::chrono::milliseconds timeout) {
  process.signal_leader(SIGTERM);
  const auto status = process.wait(timeout);
  if (!status) {
    process.kill_and_reap();
    return -1;
  }
  return WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

}  // namespace pgoutbox::test
