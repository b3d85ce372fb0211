#pragma once

#include <string>

namespace pgoutbox::app {

// Exit codes of `pgoutbox run` (documented in docs/operating.md, "Exit codes").
enum ExitCode : int {
  kExitOk = 0,      // stopped by SIGTERM/SIGINT after confirming what Kafka acknowledged
  kExitConfig = 2,  // the configuration file or environment is invalid
  // Stopped by a signal, but shutdown_timeout expired with records Kafka had not acknowledged:
  // nothing is lost (the slot was not confirmed past them; the next start sends them again).
  kExitStoppedUnacknowledged = 8,
  // 3 and up: the operator must act; each cause has its own code (relay::Fatal in
  // pgoutbox/relay/outcome.h).
  kExitSecondSignal = 130,  // a second signal: left at once, nothing unacknowledged confirmed
};

struct RunOptions {
  // Exactly-once starts though the checkpoint topic is new and the slot older (exit 25 without).
  bool accept_lost_checkpoint = false;
};

// `pgoutbox run -c FILE`: streams until a signal, reconnecting with backoff after transient
// failures; returns the process's exit code.
int run(const std::string& config_path, const RunOptions& options = {});

}  // namespace pgoutbox::app
