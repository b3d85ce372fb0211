#pragma once

// What every fault scenario shares: a pipeline (outbox table, slot, publication, topics) on the
// test binary's Postgres, pgoutbox started as a child process with a generated config, and
// the figures each scenario prints (events written, delivered, duplicates, RSS, recovery).

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "event_audit.h"
#include "load_writer.h"
#include "pgoutbox/lsn.h"
#include "pgoutbox_config.h"
#include "pgoutbox_process.h"
#include "services.h"

namespace pgoutbox::test {

// One outbox table streamed through its own slot and publication to topics `<name>.<type>`.
struct Pipeline {
  std::string name;
  std::string table;
  std::string slot;
  std::string publication;
  std::string topic_prefix;  // "<name>."
  std::vector<std::string> aggregate_types;
  std::vector<std::string> topics() const;
};

// Figures printed on stdout, one line per scenario: "FAULT <scenario>: name=value, ...".
class Figures {
 public:
  explicit Figures(std::string scenario) : scenario_(std::move(scenario)) {}
  ~Figures();
  Figures& add(const std::string& name, const std::string& value);
  Figures& add(const std::string& name, double value);
  Figures& add_ms(const std::string& name, std::chrono::steady_clock::duration value);
  Figures& add_mib(const std::string& name, std::uint64_t bytes);
  Figures& add_audit(const AuditReport& report);

 private:
  std::string scenario_;
  std::vector<std::pair<std::string, std::string>> items_;
};

class FaultTest : public ::testing::Test {
 protected:
  PgCluster& pg = shared_postgres();
  ScratchDir dir{"fault", std::nullopt};

  // A failed test whose relay met a checkpoint an open Kafka transaction hides (docs/spec.md
  // I11: the wait, then exit 23) prints what the broker knows of that partition's producers and
  // of hanging transactions, so that the transaction's owner shows in the CI log.
  void TearDown() override;
  // The operator's part after exit 23 for a hanging transaction (one the coordinator does not
  // know, which a broker restart can leave in the checkpoint topic): aborts the transaction the
  // last exit 23 in `log_name` names, with kafka-transactions.sh abort, as its message says.
  // False when no such exit is logged or the tool fails.
  bool abort_hanging_checkpoint_transaction(const std::string& log_name = "pgoutbox.log");

  // Creates the outbox table `<name>_outbox` (text ids, jsonb payload).
  Pipeline make_pipeline(const std::string& name, std::vector<std::string> aggregate_types = {"Order", "Payment"});
  PgoutboxConfig config_for(const Pipeline& p, const std::string& brokers) const;
  std::string write_config(const std::string& file, const PgoutboxConfig& config) const;
  // With a checkpoint signing key in its environment, as a deployment should run it, unless
  // `signed_checkpoints` is false (the default configuration's unsigned checkpoints).
  std::unique_ptr<PgoutboxProcess> start_pgoutbox(const std::string& config_path,
                                                  const std::string& log_name = "pgoutbox.log",
                                                  bool signed_checkpoints = true,
                                                  const std::vector<std::string>& extra_args = {}) const;
  std::string log_tail(const std::string& log_name = "pgoutbox.log") const;
  LoadWriter::Options writer_options(const Pipeline& p) const;

  Lsn current_wal_lsn() const;
  Lsn confirmed_lsn(const Pipeline& p) const;
  // Waits until the slot is confirmed at or past `target`: everything committed before it was
  // acknowledged by Kafka (confirm-after-ack). Returns how long that took, or nullopt.
  std::optional<std::chrono::steady_clock::duration> wait_confirmed(const Pipeline& p, Lsn target,
                                                                    std::chrono::milliseconds timeout) const;
  // Waits until pgoutbox holds the slot (it creates it on first start: rows committed before
  // that are not in its stream, so writers start after this). False if it exited or timed out.
  bool wait_streaming(const Pipeline& p, PgoutboxProcess& relay,
                      std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
  // True once the slot is not held by any walsender (its client is gone).
  bool slot_free(const Pipeline& p) const;
};

// The CI runs the suite also under AddressSanitizer, where memory figures mean something else.
constexpr bool kSanitized =
#if defined(__SANITIZE_ADDRESS__)
    true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    true;
#else
    false;
#endif
#else
    false;
#endif

}  // namespace pgoutbox::test
