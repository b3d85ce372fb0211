#include "kafka_broker.h"

#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <sys/wait.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>

#include "eventually.h"

namespace pgoutbox::test {
namespace {

std::string default_kafka_libs() {
  if (const char* dir = std::getenv("PGOUTBOX_KAFKA_LIBS"); dir != nullptr && *dir != '\0') return dir;
  return PGOUTBOX_KAFKA_LIBS;
}

std::string java_binary() {
  if (const char* home = std::getenv("JAVA_HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/bin/java";
  }
  return PGOUTBOX_JAVA;  // found on PATH at configure time
}

// 16 random bytes in URL-safe base64 without padding.
std::string random_base64_id() {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::random_device rd;
  std::array<unsigned char, 16> bytes{};
  for (auto& b : bytes) b = static_cast<unsigned char>(rd());
  std::string out;
  unsigned bits = 0;
  int nbits = 0;
  for (const unsigned char b : bytes) {
    bits = (bits << 8) | b;
    nbits += 8;
    while (nbits >= 6) {
      out.push_back(kAlphabet[(bits >> (nbits - 6)) & 63U]);
      nbits -= 6;
    }
  }
  if (nbits > 0) out.push_back(kAlphabet[(bits << (6 - nbits)) & 63U]);
  return out;
}

// A KRaft cluster id: 16 random bytes in URL-safe base64 without padding (as StorageTool makes),
// never starting with '-', which the tool's option parser would take for an option (Kafka's own
// Uuid.randomUuid() draws again in that case too; one start in 64 failed here before).
std::string random_cluster_id() {
  for (;;) {
    auto id = random_base64_id();
    if (id.front() != '-') return id;
  }
}

std::vector<std::string> java_argv(const std::string& libs, const std::string& scratch,
                                   const std::vector<std::string>& system_properties, const std::string& main_class) {
  std::vector<std::string> argv = {java_binary(),
                                   "-Xms128m",
                                   "-Xmx768m",
                                   "-XX:+UseSerialGC",
                                   "-XX:TieredStopAtLevel=1",
                                   "-Djava.awt.headless=true",
                                   "-Dlog4j2.configurationFile=" PGOUTBOX_KAFKA_LOG4J,
                                   "-Djava.io.tmpdir=" + scratch};
  for (const auto& property : system_properties) argv.push_back("-D" + property);
  argv.insert(argv.end(), {"-cp", libs + "/*", main_class});
  return argv;
}

}  // namespace

std::string kafka_3_9_libs() { return PGOUTBOX_KAFKA_3_9_LIBS; }
std::string kafka_4_1_libs() { return PGOUTBOX_KAFKA_4_1_LIBS; }

KafkaBroker::KafkaBroker() : KafkaBroker(Options{}) {}

KafkaBroker::KafkaBroker(const Options& options)
    : libs_(options.libs.empty() ? default_kafka_libs() : options.libs),
      system_properties_(options.system_properties),
      scratch_("kafka", std::nullopt),
      log_path_(scratch_.path() + "/broker.log"),
      config_path_(scratch_.path() + "/server.properties"),
      port_(free_loopback_port()),
      controller_port_(free_loopback_port()) {
  std::string listeners = "PLAINTEXT://127.0.0.1:" + std::to_string(port_);
  std::string protocols = "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT";
  for (const auto& name : options.listeners) {
    const int port = listener_ports_[name] = free_loopback_port();
    listeners += "," + name + "://127.0.0.1:" + std::to_string(port);
    protocols += "," + name + ":" + name;
  }
  if (!std::filesystem::is_directory(libs_)) {
    throw std::runtime_error("no Kafka jars in " + libs_ + ": run scripts/setup.sh");
  }
  std::ofstream conf(config_path_, std::ios::trunc);
  conf << "process.roles=broker,controller\n"
       << "node.id=1\n"
       << "controller.quorum.voters=1@127.0.0.1:" << controller_port_ << "\n"
       << "listeners=" << listeners << ",CONTROLLER://127.0.0.1:" << controller_port_ << "\n"
       << "advertised.listeners=" << listeners << "\n"
       << "controller.listener.names=CONTROLLER\n"
       << "inter.broker.listener.name=PLAINTEXT\n"
       << "listener.security.protocol.map=" << protocols << "\n"
       << "log.dirs=" << scratch_.path() << "/data\n"
       << "num.partitions=1\n"
       << "auto.create.topics.enable=true\n"
       << "offsets.topic.replication.factor=1\n"
       << "offsets.topic.num.partitions=4\n"
       << "transaction.state.log.replication.factor=1\n"
       << "transaction.state.log.min.isr=1\n"
       << "share.coordinator.state.topic.replication.factor=1\n"
       << "share.coordinator.state.topic.min.isr=1\n"
       << "group.initial.rebalance.delay.ms=0\n"
       << "log.flush.interval.messages=9223372036854775807\n"
       << options.properties;
  conf.close();

  std::vector<std::string> format = {"format", "--ignore-formatted", "-t", random_cluster_id(), "-c", config_path_};
  format.insert(format.end(), options.format_args.begin(), options.format_args.end());
  if (run_tool("kafka.tools.StorageTool", format, scratch_.path() + "/format.log") != 0) {
    throw std::runtime_error("kafka storage format failed:\n" + tail_of(scratch_.path() + "/format.log"));
  }
  start();
}

int KafkaBroker::run_tool(const std::string& main_class, const std::vector<std::string>& args,
                          const std::string& log_path, std::chrono::seconds timeout) const {
  auto argv = java_argv(libs_, scratch_.path(), system_properties_, main_class);
  argv.insert(argv.end(), args.begin(), args.end());
  ChildProcess tool({.argv = argv, .log_path = log_path, .run_as = std::nullopt, .extra_env = {}});
  const auto status = tool.wait(timeout);
  return status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

KafkaBroker::~KafkaBroker() { server_.kill_and_reap(); }

void KafkaBroker::start() {
  if (running()) return;
  auto argv = java_argv(libs_, scratch_.path(), system_properties_, "kafka.Kafka");
  argv.push_back(config_path_);
  server_ = ChildProcess({.argv = argv, .log_path = log_path_, .run_as = std::nullopt, .extra_env = {}});
  const bool ready = eventually(
      [&] {
        if (!server_.running()) throw std::runtime_error("kafka exited during start:\n" + tail_of(log_path_));
        return answers_metadata(std::chrono::milliseconds(1000));
      },
      std::chrono::seconds(120), std::chrono::milliseconds(100));
  if (!ready) throw std::runtime_error("kafka did not answer metadata in 120 s:\n" + tail_of(log_path_));
}

void KafkaBroker::stop() {
  if (!running()) return;
  server_.signal_group(SIGCONT);
  server_.signal_leader(SIGTERM);
  if (!server_.wait(std::chrono::seconds(60))) {
    throw std::runtime_error("kafka did not stop in 60 s:\n" + tail_of(log_path_));
  }
  server_.kill_and_reap();
}

void KafkaBroker::kill9() { server_.kill_and_reap(); }
void KafkaBroker::pause() { server_.signal_group(SIGSTOP); }
void KafkaBroker::resume() { server_.signal_group(SIGCONT); }
bool KafkaBroker::running() { return server_.running(); }

std::string KafkaBroker::bootstrap() const { return "127.0.0.1:" + std::to_string(port_); }

std::string KafkaBroker::bootstrap(const std::string& listener) const {
  return "127.0.0.1:" + std::to_string(listener_ports_.at(listener));
}

bool KafkaBroker::answers_metadata(std::chrono::milliseconds timeout) const {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap().c_str(), err, sizeof err);
  rd_kafka_conf_set(conf, "log_level", "0", err, sizeof err);
  rd_kafka_conf_set(conf, "reconnect.backoff.ms", "10", err, sizeof err);
  std::unique_ptr<rd_kafka_t, decltype(&rd_kafka_destroy)> rk(rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err),
                                                              &rd_kafka_destroy);
  if (!rk) {
    rd_kafka_conf_destroy(conf);
    return false;
  }
  const rd_kafka_metadata_t* md = nullptr;
  const auto rc = rd_kafka_metadata(rk.get(), 1, nullptr, &md, static_cast<int>(timeout.count()));
  if (rc != RD_KAFKA_RESP_ERR_NO_ERROR) return false;
  const bool has_broker = md->broker_cnt > 0;
  rd_kafka_metadata_destroy(md);
  return has_broker;
}

}  // namespace pgoutbox::test
