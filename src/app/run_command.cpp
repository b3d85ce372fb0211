#include "run_command.h"

#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include <prometheus/registry.h>

#include "pgoutbox/backoff.h"
#include "pgoutbox/config/loader.h"
#include "pgoutbox/config/redact.h"
#include "pgoutbox/diagnostics/preflight.h"
#include "pgoutbox/kafka/topic_limits.h"
#include "pgoutbox/logging/logging.h"
#include "pgoutbox/metrics/endpoints.h"
#include "pgoutbox/metrics/http_server.h"
#include "pgoutbox/metrics/relay_probe.h"
#include "pgoutbox/metrics/slot_monitor.h"
#include "pgoutbox/metrics/slot_probe.h"
#include "pgoutbox/metrics/summary.h"
#include "pgoutbox/periodic.h"
#include "pgoutbox/relay/session.h"
#include "pgoutbox/replication/connection.h"
#include "pgoutbox/secrets.h"
#include "pgoutbox/version.h"

namespace pgoutbox::app {
namespace {

using namespace std::chrono_literals;

// A session that streamed this long was healthy: the next failure backs off from the start.
constexpr auto kHealthySession = 30s;
constexpr int kAtOnceRestarts = 5;

// How often a standby (the slot is active in another instance) checks whether it can take over.
constexpr std::chrono::milliseconds kStandbyCheck = 2s;
// How often the slot's lag and retained WAL are read, and the summary line logged.
constexpr auto kSlotInterval = 5s;
constexpr auto kSummaryInterval = 30s;

// libpq puts "\n\t" between the parts of a message (the failure, then a hint such as "Is the
// server running on that host and accepting TCP/IP connections?"): one log line joins them
// with "; ".
std::string one_line(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] != '\n') {
      out += text[i++];
      continue;
    }
    while (i < text.size() && (text[i] == '\n' || text[i] == '\t' || text[i] == ' ')) ++i;
    if (!out.empty() && i < text.size()) out += "; ";
  }
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::string current;
  for (const char c : text) {
    if (c != '\n') {
      current.push_back(c);
      continue;
    }
    lines.push_back(std::move(current));
    current.clear();
  }
  if (!current.empty()) lines.push_back(std::move(current));
  return lines;
}

// SIGINT/SIGTERM for the whole run, on a thread of their own, so that a signal is handled the
// same way during a session, while connecting and between sessions. The first asks the current
// session to stop gracefully; a second exits at once (nothing unacknowledged is ever confirmed,
// so leaving abruptly loses nothing).
class SignalWatcher {
 public:
  SignalWatcher() : signals_(io_, SIGINT, SIGTERM) {
    arm();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~SignalWatcher() {
    io_.stop();
    thread_.join();
  }

  // The session a first signal should stop; nullptr between sessions.
  void attach(relay::Session* relay) {
    std::lock_guard lock(mutex_);
    relay_ = relay;
    if (relay_ != nullptr && stop_requested_) boost::asio::post(relay_->io(), [r = relay_] { r->stop(); });
  }
  bool stop_requested() {
    std::lock_guard lock(mutex_);
    return stop_requested_;
  }
  // Sleeps for `delay` unless a stop is requested first; true when it was.
  bool wait_or_stop(std::chrono::milliseconds delay) {
    std::unique_lock lock(mutex_);
    return wake_.wait_for(lock, delay, [this] { return stop_requested_; });
  }

 private:
  void arm() {
    signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
      if (ec) return;
      std::lock_guard lock(mutex_);
      if (stop_requested_) {
        spdlog::warn("second signal ({}): exiting at once", sig);
        spdlog::default_logger()->flush();
        std::_Exit(kExitSecondSignal);
      }
      spdlog::info("signal {}: stopping", sig);
      stop_requested_ = true;
      if (relay_ != nullptr) boost::asio::post(relay_->io(), [r = relay_] { r->stop(); });
      wake_.notify_all();
      arm();
    });
  }

  boost::asio::io_context io_;
  boost::asio::signal_set signals_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  relay::Session* relay_ = nullptr;
  bool stop_requested_ = false;
};

// What `check` would block on in the mapping, seen before the session turns ready (issue: a
// green deployment must not exit 17 at its first row). Postgres unreachable here is left to the
// relay's connection, which retries or names the cause.
std::optional<int> mapping_refused(const config::Config& cfg) {
  std::vector<diagnostics::Finding> problems;
  try {
    problems = diagnostics::check_mappings(cfg);
  } catch (const replication::PgError& e) {
    spdlog::debug("mapping check before the session skipped: {}", e.what());
    return std::nullopt;
  }
  if (problems.empty()) return std::nullopt;
  for (const auto& p : problems) spdlog::error("cannot continue: {}: {} Fix: {}", p.subject, p.message, p.fix);
  return relay::exit_code(relay::Fatal::mapping);
}

}  // namespace

int run(const std::string& config_path, const RunOptions& options) {
  // The format the configuration asks for is not known before it loads; until then, auto.
  logging::setup("auto", "info");
  config::Config cfg;
  try {
    cfg = config::load(config_path, config::Environment::from_process());
    // Before anything connects: every libpq and librdkafka message, every log line, is cleared
    // of the configured secrets from here on (SECURITY.md "Secrets and transport").
    remember_secrets(config::secrets_of(cfg));
    config::forget_secret_variables();
    logging::setup(cfg.log_format, cfg.log_level);
  } catch (const config::ConfigError& e) {
    spdlog::error("{}", e.what());
    return kExitConfig;
  } catch (const std::invalid_argument& e) {
    spdlog::error("{}: {}", config_path, e.what());
    return kExitConfig;
  }
  spdlog::info("pgoutbox {} starting with {}", kVersion, config_path);
  cfg.checkpoint.accept_lost = options.accept_lost_checkpoint;
  for (const auto& line : lines_of(config::describe(cfg))) spdlog::debug("config: {}", line);
  // Settings that weaken TLS or expose a secret: said once, here (`check` says the same).
  for (const auto& finding : diagnostics::check_transport_security(cfg))
    spdlog::warn("{}", diagnostics::format_line(finding));

  // Metrics outlive every session: the probes are the sessions' observer, the slot monitor and
  // the HTTP endpoints run on threads of their own from start to exit.
  prometheus::Registry registry;
  metrics::RelayProbe relay_probe(registry, metrics::TopicLabels::from(cfg));
  metrics::SlotProbe slot_probe(registry);
  metrics::register_process_info(registry, kVersion);
  std::unique_ptr<metrics::HttpServer> http;
  if (!cfg.metrics_address.empty()) {
    try {
      http = std::make_unique<metrics::HttpServer>(cfg.metrics_address, metrics::endpoints(registry, relay_probe),
                                                   metrics::HttpLimits{}, cfg.metrics_allowed_hosts);
    } catch (const std::runtime_error& e) {
      spdlog::error("{} ({}); stop what listens there, or choose another port in metrics_address", e.what(),
                    cfg.metrics_address_origin);
      return kExitConfig;
    }
    spdlog::info("serving /metrics, /healthz and /readyz on {} (port {})", cfg.metrics_address, http->port());
  }
  const metrics::SlotMonitor slot_monitor({.dsn = cfg.postgres.dsn,
                                           .password = cfg.postgres.password,
                                           .primary_dsn = cfg.postgres.primary_dsn,
                                           .application_name = cfg.postgres.application_name + "-metrics",
                                           .slot = cfg.postgres.slot,
                                           .interval = kSlotInterval,
                                           .timeout = kSlotInterval},
                                          slot_probe);
  metrics::Summary summary(relay_probe, slot_probe);
  // One last summary on the way out, after the timer's thread has stopped.
  const struct LastSummary {
    metrics::Summary& summary;
    ~LastSummary() { spdlog::info("{}", summary.next_line()); }
  } last_summary{summary};
  const Periodic summary_timer(
      kSummaryInterval, [&summary] { spdlog::info("{}", summary.next_line()); }, false);

  // The commands a fatal message names (`pgoutbox republish -c …`) work from any directory.
  std::error_code cwd_unknown;
  auto absolute_config = std::filesystem::absolute(config_path, cwd_unknown).string();
  if (cwd_unknown) absolute_config = config_path;

  SignalWatcher signals;
  Backoff backoff(cfg.reconnect.min, cfg.reconnect.max, cfg.reconnect.factor);
  bool standby = false;
  int at_once_in_a_row = 0;
  bool ever_streamed = false;
  // The walsender of the last session that streamed: kept through sessions that did not (a
  // standby answer), so that a takeover after them is still one (issue 37 item 5).
  int previous_walsender = 0;
  bool slot_created = false;  // by a session of this process
  // Records Kafka refused, remembered across sessions (a refusal ends a session: its retries are sessions).
  const auto refused_records = std::make_shared<relay::RefusedRecords>();
  // Checkpoints a session found written over another WAL history: not trusted again.
  const auto refused_checkpoints = std::make_shared<relay::RefusedCheckpoints>();
  // Each destination topic's max.message.bytes and cleanup.policy, read once for the process.
  std::shared_ptr<kafka::TopicLimits> topic_limits;
  try {
    topic_limits = kafka::cluster_topic_limits(cfg.kafka.brokers, cfg.kafka.properties);
  } catch (const std::invalid_argument&) {
    // The producer refuses the same properties at the session's start, with exit 18.
  }
  while (!signals.stop_requested()) {
    const auto started = std::chrono::steady_clock::now();
    if (const auto refused = mapping_refused(cfg)) return *refused;
    relay::Outcome outcome;
    bool delivered = false;
    try {
      relay::Session relay(cfg, &relay_probe,
                           {.sinks = {},
                            .ever_streamed = ever_streamed,
                            .previous_walsender = previous_walsender,
                            .slot_created_earlier = slot_created,
                            .refused = refused_records,
                            .refused_checkpoints = refused_checkpoints,
                            .config_path = absolute_config,
                            .topic_limits = topic_limits});
      signals.attach(&relay);
      outcome = relay.run();
      signals.attach(nullptr);
      ever_streamed = ever_streamed || relay.streamed();
      slot_created = slot_created || relay.created_slot();
      delivered = relay.counters().records_acked > 0;
      if (relay.walsender_pid() != 0) previous_walsender = relay.walsender_pid();
    } catch (const std::exception& e) {
      // Out of descriptors or memory while (re)connecting: transient, never std::terminate.
      signals.attach(nullptr);
      outcome = relay::Outcome::reconnect(fmt::format("session failed: {}", e.what()));
    }
    switch (outcome.kind) {
      case relay::Outcome::Kind::stopped:
        if (outcome.unacknowledged) {
          spdlog::warn(
              "stopped with records unacknowledged: {}; the slot was not confirmed past them, so the next "
              "start sends them again (exit {})",
              outcome.reason, static_cast<int>(kExitStoppedUnacknowledged));
          return kExitStoppedUnacknowledged;
        }
        spdlog::info("stopped{}", outcome.reason.empty() ? "" : ": " + outcome.reason);
        return kExitOk;
      case relay::Outcome::Kind::fatal:
        spdlog::error("cannot continue: {}", outcome.reason);
        return relay::exit_code(outcome.cause);
      case relay::Outcome::Kind::reconnect:
        break;
    }
    // The backoff grows only for causes that can heal, and starts again once a session
    // delivered: a session that committed before it failed was no outage of Kafka or Postgres.
    if (std::chrono::steady_clock::now() - started > kHealthySession || delivered) backoff.reset();
    // A restart at once is a session's own decision; a run of them that delivers nothing falls
    // back to the backoff, so no cause can spin the process.
    at_once_in_a_row = outcome.at_once && !delivered ? at_once_in_a_row + 1 : 0;
    if (outcome.at_once && at_once_in_a_row <= kAtOnceRestarts) {
      spdlog::info("slot {}: {}; starting a new session at once", cfg.postgres.slot, one_line(outcome.reason));
      standby = false;
      if (signals.stop_requested()) break;
      continue;
    }
    auto delay = backoff.next();
    if (outcome.standby) {
      // Another instance streams from the slot: wait as a standby, checking often enough to take
      // over within seconds of its end, and say so once rather than at every check.
      delay = std::min(delay, kStandbyCheck);
      if (!standby)
        spdlog::info("standing by: {}; checking every {} ms at most", outcome.reason, kStandbyCheck.count());
      standby = true;
    } else {
      standby = false;
      spdlog::warn(
          "slot {}: {}; retrying in {} ms (attempt {}). A cause that can heal (PostgreSQL or Kafka unreachable or "
          "restarting, a connection limit); if it persists, pgoutbox check -c {} names it and its fix",
          cfg.postgres.slot, one_line(outcome.reason), delay.count(), backoff.attempts(), config_path);
    }
    if (signals.wait_or_stop(delay)) break;
  }
  spdlog::info("stopped");
  return kExitOk;
}

}  // namespace pgoutbox::app
