#pragma once

// How a session ends, and for the ends the operator must act on, which cause: each cause has
// its own exit code (docs/operating.md "Exit codes"), so a supervisor or an alert can tell them apart.

#include <string>

namespace pgoutbox::relay {

// Causes that retrying cannot fix. The value is the process's exit code.
enum class Fatal : int {
  internal = 3,             // a bug or an undecodable stream: report it
  poison = 4,               // a poison record under poison.policy: stop
  slot_invalidated = 10,    // wal_status = lost: the WAL the slot needed is gone
  slot_unusable = 11,       // missing with create_slot off, another plugin, another database
  publication = 12,         // the publication is missing or does not cover the outbox tables
  table_missing = 13,       // a configured outbox table does not exist (or was dropped)
  permission = 14,          // the role lacks LOGIN or REPLICATION, or owns no table to create the publication
  wal_level = 15,           // wal_level is not logical
  authentication = 16,      // no or wrong password, or no pg_hba.conf entry
  mapping = 17,             // a configured column is missing or has an unusable type
  kafka_config = 18,        // librdkafka refused a property
  slot_two_phase = 19,      // the slot decodes prepared transactions (two_phase), which pgoutbox refuses
  tls = 20,                 // the server's TLS certificate failed verification
  server_version = 21,      // PostgreSQL 13 or older, or a feature the server's major lacks (failover slots before 17)
  fenced = 22,              // exactly-once: another instance with the same transactional.id took over
  checkpoint_hidden = 23,   // exactly-once: an open Kafka transaction hides the end of the checkpoint topic
  checkpoint_refused = 24,  // the checkpoint topic refuses pgoutbox's writes (ACL, max.message.bytes)
  checkpoint_lost = 25,     // exactly-once: the slot's checkpoint is lost (topic new, or erased), the slot older
};

struct Outcome {
  enum class Kind {
    stopped,    // stop() was asked for and the session closed cleanly
    reconnect,  // a transient failure (connection lost, server restart, busy slot, producer rebuilt)
    fatal,      // the operator must act; `cause` says what
  };
  Kind kind = Kind::stopped;
  std::string reason;
  Fatal cause = Fatal::internal;  // meaningful when kind == fatal
  bool standby = false;           // reconnect because the slot is active in another instance
  bool unacknowledged = false;    // stopped, with records Kafka had not acknowledged (shutdown_timeout)
  // reconnect at once, without the backoff: nothing is wrong with the servers (a producer rebuilt
  // for a topic's limit, a transaction published again without a record Kafka refused).
  bool at_once = false;

  static Outcome stopped(std::string reason = {}) { return {Kind::stopped, std::move(reason), Fatal::internal, false}; }
  static Outcome stopped_unacknowledged(std::string reason) {
    return {Kind::stopped, std::move(reason), Fatal::internal, false, true};
  }
  static Outcome reconnect(std::string reason) { return {Kind::reconnect, std::move(reason), Fatal::internal, false}; }
  static Outcome restart(std::string reason) {
    return {Kind::reconnect, std::move(reason), Fatal::internal, false, false, true};
  }
  static Outcome waiting_as_standby(std::string reason) {
    return {Kind::reconnect, std::move(reason), Fatal::internal, true};
  }
  static Outcome fatal(Fatal cause, std::string reason) { return {Kind::fatal, std::move(reason), cause, false}; }
};

inline int exit_code(Fatal cause) { return static_cast<int>(cause); }

}  // namespace pgoutbox::relay
