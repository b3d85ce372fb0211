#include "publication_watch.h"

#include <sys/socket.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <ctime>
#include <mutex>

namespace pgoutbox::relay {
namespace {

using Cause = replication::PublicationProblem::Cause;

// A commit is timestamped just before its WAL record is written, so a transaction committed
// after the publication changed can carry a time a little older than one committed before it.
// The window starts this much earlier; what that adds is published twice, and consumers drop
// the repeats by id.
constexpr std::int64_t kCommitTimeSlackMicros = 1'000'000;

std::string utc_text(std::int64_t unix_micros) {
  std::int64_t seconds = unix_micros / 1'000'000;
  std::int64_t micros = unix_micros % 1'000'000;
  if (micros < 0) {
    micros += 1'000'000;
    --seconds;
  }
  const auto t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:06}+00", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, micros);
}

// One word for a POSIX shell: as it is when nothing in it is special, in double quotes when only
// spaces and single quotes are (a predicate with a timestamp literal), else in single quotes.
std::string shell_word(const std::string& text) {
  constexpr std::string_view plain = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./-+:=@,";
  if (!text.empty() && text.find_first_not_of(plain) == std::string::npos) return text;
  if (text.find_first_of("\"$`\\!") == std::string::npos) return "\"" + text + "\"";
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string quoted_identifier(const std::string& name) {
  std::string out = "\"";
  for (const char c : name) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

const config::TableConfig* configured(const config::Config& config, const replication::TableName& table) {
  for (const auto& t : config.tables) {
    if (t.schema == table.schema && t.name == table.name) return &t;
  }
  return nullptr;
}

// The rows of `table` committed since `since`, as a republish predicate. Without
// track_commit_timestamp Postgres keeps no commit times, and the nearest is a column the mapping
// reads as the record's timestamp (an insert time, at or before the commit).
std::string window_predicate(const config::TableConfig* table, bool commit_timestamps, const std::string& since) {
  if (commit_timestamps) return fmt::format("pg_catalog.pg_xact_commit_timestamp(xmin) >= '{}'", since);
  const std::string column = table != nullptr && table->columns.timestamp ? quoted_identifier(*table->columns.timestamp)
                                                                          : std::string("<insert-time column>");
  return fmt::format("{} >= '{}'", column, since);
}

}  // namespace

class PublicationWatch::Checker {
 public:
  Checker(Settings settings, std::function<void(PublicationLoss)> on_loss)
      : settings_(std::move(settings)), on_loss_(std::move(on_loss)) {}

  std::chrono::milliseconds interval() const { return settings_.interval; }

  void tick() {
    if (reported_) return;
    try {
      if (!conn_ && !connect()) return;
      auto loss = find(*conn_);
      if (reported_down_) spdlog::info("publication watch: Postgres answers again");
      reported_down_ = false;
      if (!loss) return;
      reported_ = true;
      on_loss_(std::move(*loss));
    } catch (const replication::PgError& e) {
      close();
      if (stopping()) return;  // interrupted by the session's end
      if (!reported_down_) {
        spdlog::warn("publication watch: cannot check publication {}: {}; trying again in {} ms", settings_.publication,
                     e.what(), settings_.interval.count());
      }
      reported_down_ = true;
    }
  }

  // From the session's thread: no new connection, and the one in use (maybe blocked on a frozen
  // server) is shut down. The socket is shut down, never closed, here: libpq owns it, and
  // close() clears socket_ under the lock before libpq closes it, so the number is never reused.
  void interrupt() {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    if (socket_ >= 0) ::shutdown(socket_, SHUT_RDWR);
  }

 private:
  bool connect() {
    if (stopping()) return false;
    auto conn = replication::Connection::open(settings_.dsn, false, settings_.application_name, settings_.password,
                                              settings_.connect_timeout);
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    socket_ = PQsocket(conn.raw());
    conn_.emplace(std::move(conn));
    return true;
  }

  void close() {
    {
      std::lock_guard lock(mutex_);
      socket_ = -1;
    }
    conn_.reset();
  }

  bool stopping() {
    std::lock_guard lock(mutex_);
    return stopping_;
  }

  // The rule of the check at connect, table by table, to name every table the stream lost.
  std::optional<PublicationLoss> find(const replication::Connection& conn) const {
    PublicationLoss loss;
    for (const auto& table : settings_.tables) {
      auto problem = replication::check_publication_covers(conn, settings_.publication, {table}, false);
      // A dropped table is the stream's to meet: its rows' ancestry, then exit 13 at connect.
      if (!problem || problem->cause == Cause::table_missing) continue;
      if (loss.tables.empty()) loss.problem = *problem;
      if (problem->cause == Cause::missing || problem->cause == Cause::no_inserts) {
        loss.tables = settings_.tables;  // the publication's own state: every table is lost
        break;
      }
      loss.tables.push_back(table);
    }
    if (loss.tables.empty()) return std::nullopt;
    auto show = conn.exec("SHOW track_commit_timestamp");
    loss.commit_timestamps = PQntuples(show.get()) == 1 && std::string_view(PQgetvalue(show.get(), 0, 0)) == "on";
    return loss;
  }

  Settings settings_;
  std::function<void(PublicationLoss)> on_loss_;
  std::optional<replication::Connection> conn_;  // the watch thread's alone
  std::mutex mutex_;                             // guards socket_ and stopping_, which interrupt() reads
  int socket_ = -1;
  bool stopping_ = false;
  bool reported_ = false;
  bool reported_down_ = false;
};

PublicationWatch::PublicationWatch(Settings settings, std::function<void(PublicationLoss)> on_loss)
    : checker_(std::make_unique<Checker>(std::move(settings), std::move(on_loss))),
      periodic_(checker_->interval(), [checker = checker_.get()] { checker->tick(); }) {}

PublicationWatch::~PublicationWatch() { checker_->interrupt(); }

Outcome publication_lost(const PublicationLoss& loss, const config::Config& config,
                         const std::vector<WindowStart>& windows, const std::string& config_path) {
  const auto& publication = config.postgres.publication;
  const std::string file = shell_word(config_path.empty() ? std::string("FILE") : config_path);
  std::string skipped;
  std::string commands;
  for (const auto& w : windows) {
    const std::string label = w.table.schema + "." + w.table.name;
    const std::string since = utc_text(w.unix_micros - kCommitTimeSlackMicros);
    skipped += fmt::format(
        "{}{} committed since {} ({}, less 1 s)", skipped.empty() ? "" : "; ", label, since,
        w.from_row
            ? fmt::format("the commit time of the last transaction that brought a row of {} in this session", label)
            : fmt::format("when this session found {} published at connect: no row of it arrived since", label));
    commands += fmt::format("{}pgoutbox republish -c {} --table {} --where {}", commands.empty() ? "" : "; ", file,
                            shell_word(label),
                            shell_word(window_predicate(configured(config, w.table), loss.commit_timestamps, since)));
  }
  const std::string restore =
      loss.problem.cause == Cause::missing
          ? fmt::format(
                "create publication {0} again and drop the slot (pgoutbox slot drop -c {1} --yes): pgoutput reads "
                "publications as of the position it decodes, where the new one does not exist; the new slot starts "
                "at the current position, which the window below reaches",
                publication, file)
          : std::string("restore the publication as said above");
  const std::string selection =
      loss.commit_timestamps
          ? std::string()
          : " (track_commit_timestamp is off, so Postgres keeps no commit times: the predicate reads an insert "
            "time, which is older than its commit; widen it by the longest transaction)";
  return Outcome::fatal(
      Fatal::publication,
      fmt::format("{}. The publication changed while pgoutbox streamed: pgoutput leaves out the rows of {} committed "
                  "since, so pgoutbox stops (docs/spec.md I9); what Kafka acknowledged stays confirmed, nothing after "
                  "it. Rows the stream may have skipped: {}. Fix: {}, start pgoutbox again, then publish the window "
                  "again{}: {}",
                  loss.problem.message, loss.tables.size() == 1 ? "this table" : "these tables", skipped, restore,
                  selection, commands));
}

}  // namespace pgoutbox::relay
