#pragma once

// The publication while a session streams (docs/spec.md I9). pgoutput filters each change with
// the publication as it was when the change was written: a table taken out of the publication,
// or `publish` without `insert`, makes the stream leave out the rows committed after that, and
// nothing in the stream says so. The check at connect (Session::Setup) cannot see it; this
// watch runs the same rule (replication::check_publication_covers) every interval and soon
// after each Relation message, on an ordinary connection and a thread of its own like the slot
// monitor's (metrics/slot_monitor.h), so a slow or frozen server delays nothing of the stream.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pgoutbox/config/config.h"
#include "pgoutbox/periodic.h"
#include "pgoutbox/relay/outcome.h"
#include "pgoutbox/replication/connection.h"

namespace pgoutbox::relay {

// What the watch found: the first problem and every configured table whose rows the stream no
// longer carries.
struct PublicationLoss {
  replication::PublicationProblem problem{replication::PublicationProblem::Cause::missing, {}};
  std::vector<replication::TableName> tables;
  bool commit_timestamps = false;  // track_commit_timestamp is on: rows can be selected by commit time
};

class PublicationWatch {
 public:
  struct Settings {
    std::string dsn;
    std::string password;
    std::string application_name;
    std::string publication;
    std::vector<replication::TableName> tables;
    std::chrono::milliseconds interval{5000};
    std::chrono::seconds connect_timeout{5};
  };

  // `on_loss` is called once, on the watch's thread, at the first finding. A connection or query
  // that fails is said once and tried again at the next check: the stream meets the same server
  // and handles its loss.
  PublicationWatch(Settings settings, std::function<void(PublicationLoss)> on_loss);
  // Interrupts a query a frozen server holds (the socket is shut down), then joins the thread.
  ~PublicationWatch();
  PublicationWatch(const PublicationWatch&) = delete;
  PublicationWatch& operator=(const PublicationWatch&) = delete;

  // A Relation message arrived: check as soon as the thread is free. Any thread may call it.
  void check_now() { periodic_.trigger(); }

 private:
  class Checker;
  std::unique_ptr<Checker> checker_;
  Periodic periodic_;  // last: stops before the checker goes
};

// Where a table's window of possibly skipped rows starts, and why there.
struct WindowStart {
  replication::TableName table;
  std::int64_t unix_micros = 0;
  bool from_row = false;  // the commit time of a transaction that brought a row of it; else the connect check's time
};

// How the session ends on `loss`: Fatal::publication, naming each lost table, its window and the
// `pgoutbox republish` command that publishes that window again, and how to restore the
// publication. `config_path` goes into the command ("FILE" when empty).
Outcome publication_lost(const PublicationLoss& loss, const config::Config& config,
                         const std::vector<WindowStart>& windows, const std::string& config_path);

}  // namespace pgoutbox::relay
