#include "pgoutbox/relay/session.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include "pg_failure.h"
#include "pgoutbox/config/topic_template.h"
#include "pgoutbox/config/transactional_id.h"
#include "pgoutbox/kafka/checkpoint.h"
#include "pgoutbox/kafka/producer.h"
#include "pgoutbox/kafka/producer_sink.h"
#include "pgoutbox/kafka/topic_admin.h"
#include "pgoutbox/outbox/mapping.h"
#include "pgoutbox/relay/backfill.h"
#include "pgoutbox/replication/catalog.h"
#include "pgoutbox/replication/generated_columns.h"
#include "pgoutbox/replication/server_features.h"
#include "pgoutbox/replication/standby_snapshot.h"
#include "pgoutbox/replication/stream.h"
#include "publication_watch.h"

namespace pgoutbox::relay {
namespace {

// The server process holding the slot now; nullopt when none does or the server cannot say.
// Who holds the slot: its active_pid (0: nobody), and whether that process is a walsender (a
// replication connection, as pgoutbox's) rather than a backend running a pg_logical_slot_*
// function.
struct SlotHolder {
  int pid = 0;
  bool walsender = false;
};

std::optional<SlotHolder> slot_holder(const config::PostgresConfig& pg) {
  try {
    const auto conn =
        replication::Connection::open(pg.dsn, false, pg.application_name, pg.password, std::chrono::seconds(5));
    const auto slot = conn.slot(pg.slot);
    if (!slot) return std::nullopt;
    SlotHolder holder{slot->active_pid.value_or(0), false};
    if (holder.pid != 0) {
      const auto res = conn.exec(
          fmt::format("SELECT backend_type = 'walsender' FROM pg_catalog.pg_stat_activity WHERE pid = {}", holder.pid));
      holder.walsender = PQntuples(res.get()) == 1 && std::string_view(PQgetvalue(res.get(), 0, 0)) == "t";
    }
    return holder;
  } catch (const std::exception&) {}
  return std::nullopt;
}

using namespace std::chrono_literals;

bool in_recovery(const replication::Connection& connection) {
  const auto res = connection.exec("SELECT pg_catalog.pg_is_in_recovery()");
  return PQntuples(res.get()) == 1 && std::string_view(PQgetvalue(res.get(), 0, 0)) == "t";
}

// How often the publication is checked while streaming: the slot monitor's interval
// (app/run_command.cpp), so a changed publication is seen about as soon as a slot going bad.
constexpr auto kPublicationCheckInterval = 5s;

kafka::SinkSettings sink_settings(const config::Config& config, std::size_t batch_limit) {
  return kafka::SinkSettings{config.kafka.brokers, config.kafka.properties, config.limits.max_in_flight_records,
                             config.limits.max_in_flight_bytes, batch_limit};
}

// With the real producer and no limits kept by the caller: limits read for this session only.
SessionOptions with_limits(const config::Config& config, SessionOptions options) {
  if (options.topic_limits || options.sinks) return options;
  try {
    options.topic_limits = kafka::cluster_topic_limits(config.kafka.brokers, config.kafka.properties);
  } catch (const std::invalid_argument&) {
    // The producer refuses the same properties when the session opens it, and says so.
  }
  return options;
}

// The replication stream as the relay's change source.
class StreamSource final : public ChangeSource, private replication::StreamHandler {
 public:
  StreamSource(boost::asio::io_context& io, replication::Connection& connection, const config::Config& config,
               SessionContext context)
      : stream_(io, connection, *this, replication::StreamOptions{config.postgres.status_interval}),
        context_(context) {}

  void start(ChangeHandler& handler, std::function<void(Outcome)> on_end) override {
    handler_ = &handler;
    stream_.start([this, on_end = std::move(on_end)](const replication::StreamEnd& end) {
      if (end.reason == replication::StreamEnd::Reason::stopped) return on_end(Outcome::stopped());
      const replication::PgError as_error(end.message.empty() ? "the server ended the replication stream" : end.message,
                                          end.sqlstate);
      on_end(classify(as_error, context_));
    });
  }
  void set_flush(Lsn lsn) override { stream_.set_flush(lsn); }
  void pause() override { stream_.pause(); }
  void resume() override { stream_.resume(); }
  bool paused() const override { return stream_.paused(); }
  Lsn received() const override { return stream_.received(); }
  void stop() override { stream_.stop(); }

 private:
  void on_data(const replication::XLogData& data) override { handler_->on_data(data); }
  void on_keepalive(const replication::Keepalive& keepalive) override { handler_->on_keepalive(keepalive); }
  void on_caught_up() override { handler_->on_caught_up(); }

  replication::Stream stream_;
  SessionContext context_;
  ChangeHandler* handler_ = nullptr;
};

// Partitions and inheritance children arrive under their own names; the catalog says whose
// family they belong to, and which columns are NOT NULL for debezium-json's schemas
// (replication/catalog.h), on a SQL connection opened at the first look-up.
outbox::CatalogLookups catalog_lookups(const config::PostgresConfig& pg) {
  auto catalog = std::make_shared<replication::Catalog>(pg.dsn, pg.application_name, pg.password, pg.publication);
  return {[catalog](pgoutput::Oid relid) { return catalog->ancestors(relid); },
          [catalog](pgoutput::Oid relid) { return catalog->not_null_columns(relid); }};
}

std::vector<replication::TableName> table_names(const config::Config& config) {
  std::vector<replication::TableName> out;
  for (const auto& t : config.tables) out.push_back({t.schema, t.name});
  return out;
}

// The columns each configured table's mapping reads, for the publication pgoutbox creates.
std::vector<replication::MappedColumns> mapped_tables(const config::Config& config) {
  std::vector<replication::MappedColumns> out;
  for (const auto& t : config.tables) {
    replication::MappedColumns m{{t.schema, t.name}, {}};
    for (const auto& c : outbox::mapped_columns(t)) m.columns.push_back(c.column);
    out.push_back(std::move(m));
  }
  return out;
}

PublicationWatch::Settings watch_settings(const config::Config& config) {
  const auto& pg = config.postgres;
  return {pg.dsn,
          pg.password,
          pg.application_name + "-publication",
          pg.publication,
          table_names(config),
          kPublicationCheckInterval,
          std::chrono::duration_cast<std::chrono::seconds>(kPublicationCheckInterval)};
}

// Where each lost table's window starts: the newest row of it this session, which pgoutput sent
// while the table was published; without one, the check at connect, which found it published.
std::vector<WindowStart> windows_of(const Relay& relay, const PublicationLoss& loss, std::int64_t checked_at) {
  std::vector<WindowStart> out;
  for (const auto& t : loss.tables) {
    const auto newest = relay.newest_row_commit(t.schema + "." + t.name);
    out.push_back({t, newest.value_or(checked_at), newest.has_value()});
  }
  return out;
}

// Every instance of one slot shares it, so a standby that takes over fences the one it replaces.
std::string transactional_id_of(const config::Config& config, const kafka::SlotIdentity& identity) {
  if (!config.kafka.transactional_id.empty()) return config.kafka.transactional_id;
  return config::derived_transactional_id(identity.system_id, identity.database, identity.slot);
}

Fatal fatal_of(replication::SlotProblem::Cause cause) {
  switch (cause) {
    case replication::SlotProblem::Cause::invalidated:
      return Fatal::slot_invalidated;
    case replication::SlotProblem::Cause::two_phase:
      return Fatal::slot_two_phase;
    case replication::SlotProblem::Cause::not_logical:
    case replication::SlotProblem::Cause::other_database:
      break;
  }
  return Fatal::slot_unusable;
}

bool any_backfill(const config::Config& config) {
  for (const auto& t : config.tables) {
    if (t.backfill.enabled()) return true;
  }
  return false;
}

// What the backfill's relay tells the outside: the records, not its positions (they are the
// chunks', not the slot's) nor a session start (nothing streams yet).
class BackfillObserver final : public Observer {
 public:
  explicit BackfillObserver(Observer& inner) : inner_(inner) {}
  void event_received(std::string_view table, std::string_view topic) override { inner_.event_received(table, topic); }
  void event_published(std::string_view topic, std::chrono::microseconds commit_to_ack) override {
    inner_.event_published(topic, commit_to_ack);
  }
  void event_poison(std::string_view table, std::string_view topic, PoisonAction action) override {
    inner_.event_poison(table, topic, action);
  }
  void event_refused_before_sending(std::string_view table, std::string_view topic, RefusalReason reason) override {
    inner_.event_refused_before_sending(table, topic, reason);
  }
  void in_flight(std::uint64_t records, std::uint64_t bytes) override { inner_.in_flight(records, bytes); }
  void paused(bool paused) override { inner_.paused(paused); }
  void kafka_statistics(std::string_view json) override { inner_.kafka_statistics(json); }
  void kafka_up(bool up) override { inner_.kafka_up(up); }

 private:
  Observer& inner_;
};

}  // namespace

std::size_t producer_batch_size(const config::Config& config, kafka::TopicLimits* limits) {
  kafka::ProducerSettings settings;
  settings.properties = config.kafka.properties;
  if (limits != nullptr) {
    for (const auto& topic : config::known_topics(config)) limits->of(topic);
    settings.batch_limit = limits->smallest().value_or(0);
  }
  try {
    return kafka::effective_batch_size(settings);
  } catch (const std::invalid_argument&) {
    return 0;  // the producer refuses the properties when the session opens it
  }
}

// Connects and checks everything START_REPLICATION relies on; on success the connection
// streams from the slot and `slot_confirmed` is where the slot stood.
class Session::Setup {
 public:
  // `real_kafka`: false with a test's sinks, where no Kafka is read or written.
  Setup(const config::Config& config, bool real_kafka) : config_(config), real_kafka_(real_kafka) {}

  std::optional<Outcome> open() {
    const auto& pg = config_.postgres;
    connection.emplace(replication::Connection::open(pg.dsn, true, pg.application_name, pg.password));
    context.server_version = connection->server_version();
    replication::require_supported_server(context.server_version);
    const auto features = replication::features_of(context.server_version);
    spdlog::info("server: {}", features.describe());
    replication::require_failover_support(features, pg.failover_slot);
    identity = connection->identify_system();
    const auto tables = table_names(config_);
    auto slot = connection->slot(pg.slot);
    if (slot) {
      if (const auto problem = replication::validate_slot(*slot, identity.dbname)) {
        return Outcome::fatal(fatal_of(problem->cause), fmt::format("replication slot \"{}\" {}. Fix: {}", pg.slot,
                                                                    problem->message, problem->fix));
      }
      if (slot->synced == true && in_recovery(*connection)) {
        // Postgres 17's failover slots: the standby's copy follows the primary's slot and may not
        // be decoded until the standby is promoted.
        return Outcome::fatal(
            Fatal::slot_unusable,
            fmt::format("replication slot \"{}\" on this standby is the synchronised copy of the primary's failover "
                        "slot (synced = true): Postgres decodes it only once the standby is promoted. Fix: point "
                        "postgres.dsn at the primary, where the slot streams (list both servers with "
                        "target_session_attrs=read-write to follow a promotion); to decode on this standby, give "
                        "postgres.slot a slot of its own",
                        pg.slot));
      }
      if (any_backfill(config_)) {
        if (auto refused = backfill_state(slot)) return refused;
      }
    }
    if (!connection->publication(pg.publication) && pg.create_publication) {
      const bool generated =
          replication::needs_stored_generated_columns(*connection, pg.publication, mapped_tables(config_));
      if (slot) {
        const auto refusal = replication::refuse_publication_after_slot(
            pg.slot, connection->create_publication_sql(pg.publication, tables, generated));
        return Outcome::fatal(Fatal::publication, fmt::format("publication \"{}\" {}. Fix: {}", pg.publication,
                                                              refusal.message, refusal.fix));
      }
      spdlog::info("creating publication {} for {} table(s){}", pg.publication, tables.size(),
                   generated ? " with publish_generated_columns = stored (a mapped column is generated)" : "");
      connection->create_publication(pg.publication, tables, generated);
    }
    // Before the check: the publication covered the tables at least until this time, where the
    // window of rows a change while streaming may skip starts when no row of a table arrives
    // (publication_watch.h).
    checked_at = replication::server_time_unix_micros(*connection);
    if (auto problem = replication::check_publication_covers(*connection, pg.publication, tables)) {
      return Outcome::fatal(problem->cause == replication::PublicationProblem::Cause::table_missing
                                ? Fatal::table_missing
                                : Fatal::publication,
                            std::move(problem->message));
    }
    if (!slot) {
      // A new slot starts at the server's current position: every change after this process's
      // last confirmation would be skipped. A slot that vanished under a running relay (a
      // failover to a standby that had no synchronised copy of it, or a drop between two
      // sessions) is therefore never recreated here.
      if (context.ever_streamed) {
        return Outcome::fatal(
            Fatal::slot_unusable,
            fmt::format("replication slot \"{}\" no longer exists on the server pgoutbox now reaches (system {}, "
                        "timeline {}), though this process streamed from it: after a failover to a standby without "
                        "a synchronised copy of the slot (postgres.failover_slot: true, Postgres 17+), or a drop, a "
                        "new slot would start at the current position and skip every event committed since the last "
                        "confirmation, so pgoutbox does not create it. Fix: re-publish the outbox rows committed "
                        "since the last event Kafka holds (reconcile: docs/migrating.md, \"Publishing rows again\"), "
                        "then start pgoutbox again to create "
                        "the slot",
                        pg.slot, identity.system_id, identity.timeline));
      }
      if (!pg.create_slot) {
        return Outcome::fatal(Fatal::slot_unusable,
                              fmt::format("replication slot \"{}\" does not exist: create it (SELECT "
                                          "pg_create_logical_replication_slot('{}', 'pgoutput')) or set "
                                          "postgres.create_slot: true",
                                          pg.slot, pg.slot));
      }
      // On a hot standby the creation waits for a running-transactions record from the primary
      // (replication/standby_snapshot.h): ask for one, or say what it waits for.
      std::optional<replication::StandbySnapshotRequest> snapshot_request;
      if (in_recovery(*connection)) {
        spdlog::info("creating replication slot {} on a hot standby{}", pg.slot,
                     pg.primary_dsn.empty() ? ": it waits for the primary's next running-transactions record"
                                            : ", asking the primary (postgres.primary_dsn) for a running-transactions "
                                              "record with pg_log_standby_snapshot()");
        snapshot_request.emplace(replication::PrimaryAccess{pg.primary_dsn, pg.password, pg.application_name});
      }
      if (auto refused = ensure_checkpoint_topic()) return refused;
      if (any_backfill(config_)) {
        if (auto refused = check_backfill()) return refused;
        if (auto busy = take_backfill_lock()) return busy;
        const auto markers = backfill_markers(pg.slot);
        connection->drop_slot(markers.done);  // of an earlier slot of this name
        if (!connection->slot(markers.pending)) connection->create_marker_slot(markers.pending);
        auto exported = connection->create_slot_exporting(pg.slot, pg.failover_slot);
        slot_confirmed = exported.consistent_point;
        snapshot = std::move(exported.snapshot);
      } else {
        slot_confirmed = connection->create_slot(pg.slot, pg.failover_slot);
      }
      slot_created = true;
      snapshot_request.reset();
      spdlog::info("created replication slot {} at {}{}", pg.slot, slot_confirmed.to_string(),
                   snapshot.empty() ? "" : fmt::format(", exporting snapshot {} for the backfill", snapshot));
      if (identity.timeline > 1) {
        // A promoted standby: if pgoutbox streamed from this slot on the old primary, what was
        // committed between its last confirmation and now is not in the new slot.
        spdlog::warn(
            "the server is on timeline {} (it was promoted from a standby): if replication slot {} existed on "
            "the former primary, the events committed there since pgoutbox's last confirmation are not in "
            "the new slot and must be re-published (reconcile: docs/migrating.md, \"Publishing rows again\"); "
            "postgres.failover_slot: true keeps "
            "the slot on the standby (Postgres 17+)",
            identity.timeline, pg.slot);
      }
    } else {
      slot_confirmed = slot->confirmed_flush;
    }
    // The exported snapshot lives until this connection runs its next command: streaming starts
    // once the backfill is acknowledged (Session::backfill).
    if (snapshot.empty()) start_streaming();
    return std::nullopt;
  }

  // Every backfilled record is acknowledged: the snapshot may go, and the slot is marked done.
  void finish_backfill() {
    const auto markers = backfill_markers(config_.postgres.slot);
    snapshot.clear();
    connection->create_marker_slot(markers.done);
    connection->drop_slot(markers.pending);
  }

  void start_streaming() {
    const auto& pg = config_.postgres;
    const auto features = replication::features_of(context.server_version);
    replication::StartOptions start;
    start.slot = pg.slot;
    start.publications = {pg.publication};
    start.proto_version = features.proto_version;
    start.messages = features.messages;
    connection->start_replication(start);
    spdlog::info("streaming from slot {} at {} (server {}, proto_version {}, system {})", pg.slot,
                 slot_confirmed.to_string(), connection->server_version(), start.proto_version, identity.system_id);
  }

  // What the relay starts from (the slot, the server, the checkpoint's key).
  SessionStart start() const {
    SessionStart s;
    s.slot_confirmed = slot_confirmed;
    s.slot_created = slot_created;
    s.identity = kafka::SlotIdentity{identity.system_id, identity.dbname, config_.postgres.slot};
    s.timeline = identity.timeline;
    s.server_position = identity.xlogpos;
    if (config_.delivery == config::Delivery::exactly_once)
      s.transactional_id = transactional_id_of(config_, s.identity);
    if (config_.checkpoint.enabled) {
      auto settings = checkpoint_settings();
      // Exactly-once refuses to start without the checkpoints of an older slot (exit 25): a topic
      // created by that start would be found empty, not missing, at the next one.
      settings.create_missing =
          config_.delivery != config::Delivery::exactly_once || slot_created || config_.checkpoint.accept_lost;
      std::optional<kafka::CheckpointKey> key;
      if (!config_.checkpoint.signing_key.empty()) key.emplace(config_.checkpoint.signing_key);
      s.read_checkpoints = [settings = std::move(settings), identity = s.identity, id = s.transactional_id,
                            key = std::move(key)] {
        return kafka::read_checkpoints(settings, identity, id, key ? &*key : nullptr);
      };
    }
    return s;
  }

  kafka::CheckpointSettings checkpoint_settings() const {
    kafka::CheckpointSettings settings{config_.kafka.brokers, config_.kafka.properties, config_.checkpoint.topic};
    settings.hidden_wait =
        kafka::hidden_end_wait(config_.kafka.properties, config_.delivery == config::Delivery::exactly_once);
    return settings;
  }

  // The checkpoint topic exists before the slot is created: a slot without it is then one whose
  // checkpoints were lost (exit 25 in exactly-once, a warning in at-least-once), never one whose
  // first start died between the two. Exactly-once cannot go on without the topic; at-least-once
  // says why and goes on (it reads and writes checkpoints as it can).
  std::optional<Outcome> ensure_checkpoint_topic() const {
    if (!config_.checkpoint.enabled || !real_kafka_) return std::nullopt;
    try {
      kafka::ensure_checkpoint_topic(checkpoint_settings());
    } catch (const std::exception& e) {
      if (config_.delivery == config::Delivery::exactly_once) {
        return Outcome::reconnect(
            fmt::format("the checkpoint topic must exist before replication slot {} is "
                        "created: {}",
                        config_.postgres.slot, e.what()));
      }
      spdlog::warn("checkpoint: creating topic {} before replication slot {}: {}", config_.checkpoint.topic,
                   config_.postgres.slot, e.what());
    }
    return std::nullopt;
  }

  // The dead-letter topic exists before the first poison record needs it: a topic Kafka takes for
  // its twin ('.' and '_' as one), or a policy, would make every dead letter fail and stop the
  // relay at its first poison record (exit 4), after confirming what came before. It stops here,
  // at the start, instead. A cluster that does not answer, or does not let pgoutbox create it, is
  // said and not held against it: the first dead letter tells (the broker may create it then).
  std::optional<Outcome> ensure_dead_letter_topic() const {
    if (config_.poison.policy != config::PoisonPolicy::dead_letter || !real_kafka_) return std::nullopt;
    const auto& topic = config_.poison.dead_letter_topic;
    const auto result = kafka::ensure_topic(config_.kafka.brokers, config_.kafka.properties,
                                            {.name = topic, .partitions = -1, .config = {}}, std::chrono::seconds(10));
    switch (result.kind) {
      case kafka::TopicCreation::Kind::created:
        spdlog::info("created dead-letter topic {} (poison.dead_letter_topic)", topic);
        break;
      case kafka::TopicCreation::Kind::exists:
        break;
      case kafka::TopicCreation::Kind::refused:
        return Outcome::fatal(
            Fatal::poison,
            fmt::format(
                "the dead-letter topic {} cannot be created ({}); poison.policy is dead-letter, and no poison "
                "record could be written there. Fix: if a topic's name collides with it (Kafka takes '.' and '_' "
                "for one character), delete that topic; otherwise create {} as the broker's policy allows; or "
                "set poison.dead_letter_topic to another name",
                topic, result.error, topic));
      case kafka::TopicCreation::Kind::failed:
        spdlog::warn(
            "dead-letter topic {} (poison.dead_letter_topic): not known to exist ({}); the first poison record "
            "will tell whether it can be written",
            topic, result.error);
        break;
    }
    return std::nullopt;
  }

  std::optional<replication::Connection> connection;
  SessionContext context;
  std::int64_t checked_at = 0;  // the server's time (Unix µs) just before the publication check
  Lsn slot_confirmed;
  bool slot_created = false;  // by this session
  replication::SystemIdentity identity;
  std::string snapshot;  // exported by the slot just created, for the backfill

 private:
  // A backfill is configured and the slot exists: stream on when its backfill finished; drop it
  // (`slot` is reset) to backfill again from the start when the backfill was interrupted; refuse
  // when the slot predates the backfill, whose snapshot is long gone.
  std::optional<Outcome> backfill_state(std::optional<replication::SlotState>& slot) {
    const auto& pg = config_.postgres;
    const auto markers = backfill_markers(pg.slot);
    if (connection->slot(markers.done)) return std::nullopt;
    if (connection->slot(markers.pending)) {
      // Between the slot's creation and the end of its backfill the slot is inactive; the
      // instance backfilling it holds the lock, and its slot must not be dropped under it
      // (issue 24 item 3).
      if (auto busy = take_backfill_lock()) return busy;
      spdlog::warn(
          "the backfill of replication slot {} did not finish (slot {} marks it): dropping the slot to backfill "
          "again from the start; records the interrupted backfill published are published again (consumers "
          "deduplicate by the id header)",
          pg.slot, markers.pending);
      connection->drop_slot(pg.slot);
      slot.reset();
      return std::nullopt;
    }
    return Outcome::fatal(
        Fatal::slot_unusable,
        fmt::format(
            "tables[].backfill is set, and replication slot \"{}\" already exists without a backfill: a "
            "backfill reads the snapshot a slot exports when it is created, and this slot's is gone. Fix: "
            "publish the rows again with pgoutbox republish -c FILE --table T --where PREDICATE (docs/migrating.md "
            "\"Publishing rows again\") and remove backfill from the configuration; or drop the slot "
            "(pgoutbox slot drop -c FILE --yes) to backfill at its creation, which skips whatever the slot "
            "still holds unconfirmed",
            pg.slot));
  }

  // The lock of the instance that creates and backfills the slot; a standby that cannot take it
  // waits, as it waits for an active slot.
  std::optional<Outcome> take_backfill_lock() {
    if (connection->try_backfill_lock(config_.postgres.slot)) return std::nullopt;
    return Outcome::waiting_as_standby(
        fmt::format("replication slot {} is being created and backfilled by another pgoutbox instance (it holds the "
                    "backfill lock); waiting to take over if it stops",
                    config_.postgres.slot));
  }

  // Every backfill predicate is valid SQL for its table, before anything is created.
  std::optional<Outcome> check_backfill() {
    RowReader reader(config_.postgres, "");
    for (const auto& t : config_.tables) {
      if (!t.backfill.enabled()) continue;
      if (auto error = reader.explain_error(backfill_selection(t))) {
        return Outcome::fatal(
            Fatal::mapping,
            fmt::format("tables[{}.{}].backfill: SELECT * FROM the table WHERE ({}) ORDER BY {} is refused: {}. "
                        "Fix: backfill.where must be an SQL predicate over the table's columns and "
                        "backfill.order_by one of its columns; nothing was created",
                        t.schema, t.name, t.backfill.where, backfill_selection(t).order_by, *error));
      }
    }
    return std::nullopt;
  }

  const config::Config& config_;
  bool real_kafka_;
};

Session::Session(const config::Config& config, Observer* observer, SessionOptions options)
    : config_(config),
      options_(with_limits(config, std::move(options))),
      batch_size_(options_.topic_limits ? producer_batch_size(config, options_.topic_limits.get()) : 0),
      sinks_(options_.sinks ? options_.sinks
                            : kafka::producer_sink_factory(sink_settings(
                                  config, options_.topic_limits ? options_.topic_limits->smallest().value_or(0) : 0))),
      observer_(observer != nullptr ? observer : &no_observer_),
      relay_(config, io_, clock_, sinks_, *observer_, catalog_lookups(config.postgres)) {}

Session::~Session() = default;

Outcome Session::run() {
  Setup setup(config_, !options_.sinks);
  setup.context.ever_streamed = options_.ever_streamed;
  try {
    if (auto failed = setup.open()) return taken_over_if(*failed);
  } catch (const replication::PgError& e) {
    return taken_over_if(classify(e, setup.context));
  }
  try {
    if (auto refused = setup.ensure_dead_letter_topic()) return *refused;
  } catch (const std::invalid_argument&) {
    // librdkafka refuses a property: the producer says so with its own exit code.
  }
  // A slot this process created has no checkpoint anywhere yet, whichever session created it.
  setup.slot_created = setup.slot_created || options_.slot_created_earlier;
  created_slot_ = setup.slot_created;
  if (!setup.snapshot.empty()) {
    try {
      if (auto ended = backfill(setup.snapshot, setup.start())) return *ended;
      setup.finish_backfill();
      setup.start_streaming();
    } catch (const replication::PgError& e) {
      // 57014: the count ran past tables[].backfill.statement_timeout (RowReader names it), and
      // would again at every attempt.
      if (e.sqlstate() == "57014") {
        return Outcome::fatal(Fatal::mapping,
                              fmt::format("the backfill's query was cancelled: {}. Fix: change tables[].backfill.where "
                                          "or raise tables[].backfill.statement_timeout, then start again",
                                          e.what()));
      }
      // A predicate PREPARE accepts can still fail on a row (a cast, a division): every attempt
      // would fail the same way, publishing again what came before the row.
      if (e.sqlstate().starts_with("22")) {
        return Outcome::fatal(
            Fatal::mapping,
            fmt::format("the backfill's query failed on the table's rows: {}. Fix: change tables[].backfill.where "
                        "(or order_by) so that it holds for every row, then start again; the next start backfills "
                        "from the start",
                        e.what()));
      }
      return classify(e, setup.context);
    }
  }
  StreamSource source(io_, *setup.connection, config_, setup.context);
  streamed_ = true;
  walsender_pid_ = PQbackendPID(setup.connection->raw());
  streaming_ = true;
  auto start = setup.start();
  start.refused = options_.refused;
  start.refused_checkpoints = options_.refused_checkpoints;
  start.topic_limits = options_.topic_limits;
  start.batch_size = batch_size_;
  if (options_.sinks) start.read_checkpoints = nullptr;  // a test's sinks: no real Kafka to read
  // A message outbox needs nothing of the publication: pgoutput sends logical decoding messages
  // whatever it lists.
  std::optional<PublicationWatch> watch;
  if (!config_.tables.empty()) {
    watch.emplace(watch_settings(config_), [this, checked_at = setup.checked_at](PublicationLoss loss) {
      boost::asio::post(io_, [this, loss = std::move(loss), checked_at] {
        relay_.fail(publication_lost(loss, config_, windows_of(relay_, loss, checked_at), options_.config_path));
      });
    });
    start.relation_arrived = [&watch] { watch->check_now(); };
  }
  if (config_.delivery == config::Delivery::exactly_once) {
    // The server cannot say: a fence it is.
    start.holds_slot = [this, walsender = walsender_pid_] {
      const auto holder = slot_holder(config_.postgres);
      return holder && holder->pid == walsender;
    };
  }
  auto outcome = relay_.run(source, std::move(start));
  watch.reset();
  streaming_ = false;
  return outcome;
}

// Exactly-once: the slot found active in another process right after this instance streamed
// from it is a takeover: the new holder initialises the same transactional ids, which fences this
// instance's producers (closed with the last session already). Kafka does not always tell the
// old producer first: the fault suite's instance woken after a takeover sometimes ended its
// session on the lost replication connection with its abort answered without a fence. So the
// instance ends as fenced (exit 22), as when Kafka tells it, instead of standing by without a
// word. The slot still held by this instance's own last walsender (not yet gone after a broken
// connection) is no takeover; nor is a holder the server cannot name, nor one that is no
// walsender (an operator's pg_logical_slot_* call holds the slot for its length: issue 37 item 5).
Outcome Session::taken_over_if(Outcome outcome) const {
  if (!outcome.standby || options_.previous_walsender == 0 || config_.delivery != config::Delivery::exactly_once)
    return outcome;
  const auto holder = slot_holder(config_.postgres);
  if (!holder || holder->pid == 0 || holder->pid == options_.previous_walsender || !holder->walsender) return outcome;
  return Outcome::fatal(
      Fatal::fenced,
      fmt::format("another instance took over slot {} right after this one streamed from it (its walsender is PID "
                  "{}; {}); in exactly-once delivery it fences this one's transactional ids, so this one writes "
                  "nothing more. A supervisor may restart it: it then waits as a standby",
                  config_.postgres.slot, holder->pid, outcome.reason));
}

std::optional<Outcome> Session::backfill(const std::string& snapshot, SessionStart start) {
  RowReader reader(config_.postgres, snapshot);
  std::vector<RowSource::Table> tables;
  for (const auto& t : config_.tables) {
    if (!t.backfill.enabled()) continue;
    auto selection = backfill_selection(t);
    const auto total = reader.count(selection);
    spdlog::info("backfill {}.{}: {} row(s) WHERE ({}) in the slot's snapshot, read in the order of {}, {} at a time",
                 t.schema, t.name, total, selection.where, selection.order_by, selection.chunk_rows);
    tables.push_back({std::move(selection), total});
  }
  RowSource source(io_, reader, std::move(tables), [this](const RowProgress& p) {
    observer_->backfill_progress(p.table, p.read, p.published, p.total);
    spdlog::info("backfill {}: {} row(s) read, {} published, of {}", p.table, p.read, p.published, p.total);
  });
  // The chunks' positions are the backfill's own: no provenance header may carry them.
  backfill_config_.emplace(config_);
  backfill_config_->provenance_headers = false;
  backfill_observer_ = std::make_unique<BackfillObserver>(*observer_);
  backfill_relay_.emplace(*backfill_config_, io_, clock_, sinks_, *backfill_observer_);
  start.slot_confirmed = Lsn{};
  start.read_checkpoints = nullptr;  // the checkpoint is the slot's, written by the stream
  start.write_checkpoints = false;
  active_ = &*backfill_relay_;
  auto outcome = backfill_relay_->run(source, std::move(start));
  active_ = &relay_;
  if (!source.finished()) {
    if (outcome.kind == Outcome::Kind::stopped) {
      spdlog::warn("stopped during the backfill: the next start drops the slot and backfills again from the start");
    }
    return outcome;
  }
  const auto& counters = backfill_relay_->counters();
  spdlog::info("backfill done: {} row(s) read, {} record(s) acknowledged; streaming from the slot's consistent point",
               counters.rows_received, counters.records_acked);
  return std::nullopt;
}

}  // namespace pgoutbox::relay
