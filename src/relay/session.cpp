#include "pgoutbox/relay/session.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "pg_failure.h"
#include "pgoutbox/kafka/checkpoint.h"
#include "pgoutbox/kafka/producer_sink.h"
#include "pgoutbox/replication/catalog.h"
#include "pgoutbox/replication/server_features.h"
#include "pgoutbox/replication/stream.h"

namespace pgoutbox::relay {
namespace {

kafka::SinkFactory real_sinks(const config::Config& config) {
  return kafka::producer_sink_factory(kafka::SinkSettings{config.kafka.brokers, config.kafka.properties,
                                                          config.limits.max_in_flight_records,
                                                          config.limits.max_in_flight_bytes});
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
// family they belong to (replication/catalog.h), on a SQL connection opened at the first
// relation that is not named like a configured table.
outbox::AncestryLookup ancestry_lookup(const config::PostgresConfig& pg) {
  auto catalog = std::make_shared<replication::Catalog>(pg.dsn, pg.application_name, pg.password, pg.publication);
  return [catalog](pgoutput::Oid relid) { return catalog->ancestors(relid); };
}

std::vector<replication::TableName> table_names(const config::Config& config) {
  std::vector<replication::TableName> out;
  for (const auto& t : config.tables) out.push_back({t.schema, t.name});
  return out;
}

// Every instance of one slot shares it, so a standby that takes over fences the one it replaces.
std::string transactional_id_of(const config::Config& config, const kafka::SlotIdentity& identity) {
  if (!config.kafka.transactional_id.empty()) return config.kafka.transactional_id;
  return fmt::format("pgoutbox-{}-{}-{}", identity.system_id, identity.database, identity.slot);
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

}  // namespace

// Connects and checks everything START_REPLICATION relies on; on success the connection
// streams from the slot and `slot_confirmed` is where the slot stood.
class Session::Setup {
 public:
  explicit Setup(const config::Config& config) : config_(config) {}

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
    const auto slot = connection->slot(pg.slot);
    if (slot) {
      if (const auto problem = replication::validate_slot(*slot, identity.dbname)) {
        return Outcome::fatal(fatal_of(problem->cause), fmt::format("replication slot \"{}\" {}. Fix: {}", pg.slot,
                                                                    problem->message, problem->fix));
      }
    }
    if (!connection->publication(pg.publication) && pg.create_publication) {
      if (slot) {
        const auto refusal = replication::refuse_publication_after_slot(
            pg.slot, connection->create_publication_sql(pg.publication, tables));
        return Outcome::fatal(Fatal::publication, fmt::format("publication \"{}\" {}. Fix: {}", pg.publication,
                                                              refusal.message, refusal.fix));
      }
      spdlog::info("creating publication {} for {} table(s)", pg.publication, tables.size());
      connection->create_publication(pg.publication, tables);
    }
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
                        "since the last event Kafka holds (reconcile, README), then start pgoutbox again to create "
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
      slot_confirmed = connection->create_slot(pg.slot, pg.failover_slot);
      spdlog::info("created replication slot {} at {}", pg.slot, slot_confirmed.to_string());
      if (identity.timeline > 1) {
        // A promoted standby: if pgoutbox streamed from this slot on the old primary, what was
        // committed between its last confirmation and now is not in the new slot.
        spdlog::warn(
            "the server is on timeline {} (it was promoted from a standby): if replication slot {} existed on "
            "the former primary, the events committed there since pgoutbox's last confirmation are not in "
            "the new slot and must be re-published (reconcile, README); postgres.failover_slot: true keeps "
            "the slot on the standby (Postgres 17+)",
            identity.timeline, pg.slot);
      }
    } else {
      slot_confirmed = slot->confirmed_flush;
    }
    replication::StartOptions start;
    start.slot = pg.slot;
    start.publications = {pg.publication};
    start.proto_version = features.proto_version;
    start.messages = features.messages;
    connection->start_replication(start);
    spdlog::info("streaming from slot {} at {} (server {}, proto_version {}, system {})", pg.slot,
                 slot_confirmed.to_string(), connection->server_version(), start.proto_version, identity.system_id);
    return std::nullopt;
  }

  // What the relay starts from (the slot, the server, the checkpoint's key).
  SessionStart start() const {
    SessionStart s;
    s.slot_confirmed = slot_confirmed;
    s.identity = kafka::SlotIdentity{identity.system_id, identity.dbname, config_.postgres.slot};
    s.timeline = identity.timeline;
    s.server_position = identity.xlogpos;
    if (config_.delivery == config::Delivery::exactly_once)
      s.transactional_id = transactional_id_of(config_, s.identity);
    if (config_.checkpoint.enabled) {
      kafka::CheckpointSettings settings{config_.kafka.brokers, config_.kafka.properties, config_.checkpoint.topic};
      s.read_checkpoints = [settings = std::move(settings), identity = s.identity, id = s.transactional_id] {
        return kafka::read_checkpoints(settings, identity, id);
      };
    }
    return s;
  }

  std::optional<replication::Connection> connection;
  SessionContext context;
  Lsn slot_confirmed;
  replication::SystemIdentity identity;

 private:
  const config::Config& config_;
};

Session::Session(const config::Config& config, Observer* observer, SessionOptions options)
    : config_(config),
      options_(std::move(options)),
      relay_(config, io_, options_.sinks ? options_.sinks : real_sinks(config),
             observer != nullptr ? *observer : no_observer_, ancestry_lookup(config.postgres)) {}

Session::~Session() = default;

Outcome Session::run() {
  Setup setup(config_);
  setup.context.ever_streamed = options_.ever_streamed;
  try {
    if (auto failed = setup.open()) return *failed;
  } catch (const replication::PgError& e) {
    return classify(e, setup.context);
  }
  StreamSource source(io_, *setup.connection, config_, setup.context);
  streamed_ = true;
  streaming_ = true;
  auto start = setup.start();
  start.refused = options_.refused;
  if (options_.sinks) start.read_checkpoints = nullptr;  // a test's sinks: no real Kafka to read
  auto outcome = relay_.run(source, std::move(start));
  streaming_ = false;
  return outcome;
}

}  // namespace pgoutbox::relay
