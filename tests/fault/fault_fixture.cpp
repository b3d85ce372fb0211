#include "fault_fixture.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <regex>
#include <set>

#include "eventually.h"

namespace pgoutbox::test {

std::vector<std::string> Pipeline::topics() const {
  std::vector<std::string> out;
  for (const auto& t : aggregate_types) out.push_back(topic_prefix + t);
  return out;
}

Figures::~Figures() {
  std::string line = "FAULT " + scenario_ + ":";
  for (std::size_t i = 0; i < items_.size(); ++i)
    line += (i == 0 ? " " : ", ") + items_[i].first + "=" + items_[i].second;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

Figures& Figures::add(const std::string& name, const std::string& value) {
  items_.emplace_back(name, value);
  return *this;
}

Figures& Figures::add(const std::string& name, double value) { return add(name, fmt::format("{:g}", value)); }

Figures& Figures::add_ms(const std::string& name, std::chrono::steady_clock::duration value) {
  return add(name, fmt::format("{}ms", std::chrono::duration_cast<std::chrono::milliseconds>(value).count()));
}

Figures& Figures::add_mib(const std::string& name, std::uint64_t bytes) {
  return add(name, fmt::format("{:.1f}MiB", static_cast<double>(bytes) / (1024.0 * 1024.0)));
}

Figures& Figures::add_audit(const AuditReport& report) {
  add("written", static_cast<double>(report.written));
  add("delivered", static_cast<double>(report.delivered));
  add("records", static_cast<double>(report.records));
  add("duplicates", static_cast<double>(report.duplicates));
  add("lost", static_cast<double>(report.lost));
  return *this;
}

Pipeline FaultTest::make_pipeline(const std::string& name, std::vector<std::string> aggregate_types) {
  Pipeline p{name, name + "_outbox", name + "_slot", name + "_pub", name + ".", std::move(aggregate_types)};
  create_outbox_table(pg.dsn(), p.table);
  return p;
}

PgoutboxConfig FaultTest::config_for(const Pipeline& p, const std::string& brokers) const {
  auto c = pipeline_config(pg.dsn(), brokers, p.name);
  c.tables.front().table = "public." + p.table;
  c.kafka_properties = {{"linger.ms", "5"}};
  c.log_format = "text";
  return c;
}

std::string FaultTest::write_config(const std::string& file, const PgoutboxConfig& config) const {
  return write_pgoutbox_config(dir.path() + "/" + file, config);
}

std::unique_ptr<PgoutboxProcess> FaultTest::start_pgoutbox(const std::string& config_path, const std::string& log_name,
                                                           bool signed_checkpoints,
                                                           const std::vector<std::string>& extra_args) const {
  std::vector<std::string> env;
  if (signed_checkpoints) env.emplace_back(kCheckpointSigningKeyEnv);
  return std::make_unique<PgoutboxProcess>(PGOUTBOX_BINARY, config_path, dir.path() + "/" + log_name, std::move(env),
                                           extra_args);
}

std::string FaultTest::log_tail(const std::string& log_name) const { return tail_of(dir.path() + "/" + log_name); }

bool FaultTest::abort_hanging_checkpoint_transaction(const std::string& log_name) {
  const std::regex named(R"(partition (\d+) of checkpoint topic (\S+) ends at offset (\d+) for read_committed)");
  std::optional<std::array<std::string, 3>> last;
  std::ifstream in(dir.path() + "/" + log_name);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (line.find("cannot continue") != std::string::npos && std::regex_search(line, m, named))
      last = std::array<std::string, 3>{m[1].str(), m[2].str(), m[3].str()};
  }
  if (!last) return false;
  auto& kafka = shared_kafka();
  const auto log = dir.path() + "/transactions-abort.log";
  const int rc = kafka.run_tool("org.apache.kafka.tools.TransactionsCommand",
                                {"--bootstrap-server", kafka.bootstrap(), "abort", "--topic", (*last)[1], "--partition",
                                 (*last)[0], "--start-offset", (*last)[2]},
                                log, std::chrono::seconds(60));
  std::cout << "aborted the hanging transaction at offset " << (*last)[2] << " of " << (*last)[1] << " partition "
            << (*last)[0] << " (kafka-transactions.sh abort, exit " << rc << "):\n"
            << tail_of(log) << "\n";
  return rc == 0;
}

void FaultTest::TearDown() {
  if (!HasFailure()) return;
  const std::regex hidden(R"(checkpoint topic (\S+) partition (\d+): read_committed ends at offset)");
  std::set<std::pair<std::string, std::string>> partitions;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    if (entry.path().extension() != ".log") continue;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (std::regex_search(line, m, hidden)) partitions.emplace(m[1].str(), m[2].str());
    }
  }
  if (partitions.empty()) return;
  auto& kafka = shared_kafka();
  const auto tool = [&](const std::vector<std::string>& args) {
    const auto log = dir.path() + "/transactions-tool.log";
    std::vector<std::string> argv = {"--bootstrap-server", kafka.bootstrap()};
    argv.insert(argv.end(), args.begin(), args.end());
    const int rc = kafka.run_tool("org.apache.kafka.tools.TransactionsCommand", argv, log, std::chrono::seconds(30));
    std::cout << "kafka-transactions " << fmt::format("{}", fmt::join(args, " ")) << " (exit " << rc << "):\n"
              << tail_of(log) << "\n";
  };
  for (const auto& [topic, partition] : partitions)
    tool({"describe-producers", "--topic", topic, "--partition", partition});
  tool({"list"});
  tool({"find-hanging", "--broker-id", "1"});
}

LoadWriter::Options FaultTest::writer_options(const Pipeline& p) const {
  LoadWriter::Options o;
  o.dsn = pg.dsn();
  o.table = p.table;
  o.topic_prefix = p.topic_prefix;
  o.aggregate_types = p.aggregate_types;
  o.id_prefix = p.name;
  return o;
}

Lsn FaultTest::current_wal_lsn() const { return *Lsn::parse(*pg.query_value("SELECT pg_current_wal_lsn()")); }

Lsn FaultTest::confirmed_lsn(const Pipeline& p) const {
  const auto text = slot_confirmed_lsn(pg.dsn(), p.slot);
  return text ? Lsn::parse(*text).value_or(Lsn{}) : Lsn{};
}

std::optional<std::chrono::steady_clock::duration> FaultTest::wait_confirmed(const Pipeline& p, Lsn target,
                                                                             std::chrono::milliseconds timeout) const {
  const auto started = std::chrono::steady_clock::now();
  const bool reached = eventually(
      [&] {
        try {
          return confirmed_lsn(p) >= target;
        } catch (const std::exception&) {
          return false;  // Postgres restarting
        }
      },
      timeout, std::chrono::milliseconds(100));
  if (!reached) return std::nullopt;
  return std::chrono::steady_clock::now() - started;
}

bool FaultTest::wait_streaming(const Pipeline& p, PgoutboxProcess& relay, std::chrono::milliseconds timeout) const {
  // CREATE_REPLICATION_SLOT shows the slot active, with no confirmed_flush_lsn, until it reaches its
  // consistent point; a kill before that leaves no slot at all, and rows written then are in no
  // slot's stream.
  return eventually(
             [&] {
               return !relay.running() ||
                      (slot_active_pid(pg.dsn(), p.slot).has_value() && slot_confirmed_lsn(pg.dsn(), p.slot));
             },
             timeout) &&
         relay.running();
}

bool FaultTest::slot_free(const Pipeline& p) const { return !slot_active_pid(pg.dsn(), p.slot).has_value(); }

}  // namespace pgoutbox::test
