#include "pgoutbox/relay/relay.h"

#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "dead_letter.h"
#include "pgoutbox/logging/logging.h"
#include "pgoutbox/pgoutput/decoder.h"
#include "pgoutbox/replication/server_features.h"

namespace pgoutbox::relay {
namespace {

using namespace std::chrono_literals;

std::vector<replication::TableName> table_names(const config::Config& config) {
  std::vector<replication::TableName> out;
  for (const auto& t : config.tables) out.push_back({t.schema, t.name});
  return out;
}

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

// The one place that decides what a Postgres failure means for the session (STYLE.md 7):
// transient causes reconnect after a backoff; the others name what the operator must fix.
Outcome classify(const replication::PgError& e) {
  const std::string& state = e.sqlstate();
  const std::string what = e.what();
  const auto fatal = [&what](Fatal cause, std::string_view fix) {
    return Outcome::fatal(cause, what.find(fix) == std::string::npos ? fmt::format("{}. Fix: {}", what, fix) : what);
  };
  if (state == "55006") return Outcome::waiting_as_standby(what);  // the slot is active in another instance
  if (state == "0A000") return Outcome::fatal(Fatal::unsupported_server, what);  // a server too old for a feature
  if (state == "28P01" || state == "28000" || contains(what, "password authentication failed") ||
      contains(what, "no pg_hba.conf entry")) {
    return fatal(Fatal::authentication,
                 "check the password (PGOUTBOX_POSTGRES_PASSWORD or postgres.password_file) and that pg_hba.conf "
                 "allows this user both the database and replication connections");
  }
  if (contains(what, "wal_level")) {
    return fatal(Fatal::wal_level, "set wal_level = logical in postgresql.conf and restart PostgreSQL");
  }
  if (state == "42501" || contains(what, "must be superuser or replication role") ||
      contains(what, "permission denied")) {
    return fatal(Fatal::permission,
                 "grant the role REPLICATION and SELECT on the outbox tables (see sql/role.sql), e.g. ALTER ROLE "
                 "<user> REPLICATION; GRANT SELECT ON <outbox table> TO <user>");
  }
  if (state == "42P01") {
    return fatal(Fatal::table_missing, "create the table, or remove it from tables: in the configuration");
  }
  if (contains(what, "invalidated") || contains(what, "can no longer get changes")) {
    return fatal(Fatal::slot_invalidated,
                 "drop and recreate the slot (pgoutbox slot drop --yes), then reconcile: events written while the "
                 "slot was lost may be missing from Kafka");
  }
  if (contains(what, "publication")) return Outcome::fatal(Fatal::publication, what);  // its messages name the fix
  if (state == "42704" || state == "55000") return Outcome::fatal(Fatal::slot_unusable, what);
  return Outcome::reconnect(what);  // connection refused or lost, shutdown in progress, …
}

}  // namespace

Relay::Relay(const config::Config& config, Observer* observer)
    : config_(config),
      observer_(observer != nullptr ? *observer : no_observer_),
      mapping_(config.tables, config.provenance_headers),
      poll_timer_(io_),
      stop_deadline_(io_),
      retry_timer_(io_) {}

Relay::~Relay() {
  stream_.reset();
  if (reports_) {
    boost::system::error_code ignored;
    reports_->close(ignored);
  }
  if (isolated_reports_) {
    boost::system::error_code ignored;
    isolated_reports_->close(ignored);
  }
  isolated_.reset();
  producer_.reset();
}

void Relay::connect() {
  const auto& pg = config_.postgres;
  connection_.emplace(replication::Connection::open(pg.dsn, true, pg.application_name, pg.password));
  replication::require_supported_server(connection_->server_version());
  const auto features = replication::features_of(connection_->server_version());
  spdlog::info("server: {}", features.describe());
  replication::require_failover_support(features, pg.failover_slot);
  const auto identity = connection_->identify_system();
  const auto tables = table_names(config_);
  if (!connection_->publication(pg.publication) && pg.create_publication) {
    spdlog::info("creating publication {} for {} table(s)", pg.publication, tables.size());
    connection_->create_publication(pg.publication, tables);
  }
  replication::check_publication_covers(*connection_, pg.publication, tables);

  const auto slot = connection_->slot(pg.slot);
  if (!slot) {
    if (!pg.create_slot) {
      throw replication::PgError(fmt::format("replication slot \"{}\" does not exist: create it "
                                             "(SELECT pg_create_logical_replication_slot('{}', 'pgoutput')) or set "
                                             "postgres.create_slot: true",
                                             pg.slot, pg.slot),
                                 "42704");
    }
    const auto at = connection_->create_slot(pg.slot, pg.failover_slot);
    spdlog::info("created replication slot {} at {}", pg.slot, at.to_string());
  } else {
    if (slot->plugin != "pgoutput") {
      throw replication::PgError(
          fmt::format("replication slot \"{}\" uses plugin {}, not pgoutput: drop it or choose another slot name",
                      pg.slot, slot->plugin),
          "55000");
    }
    if (slot->wal_status == "lost") {
      throw replication::PgError(
          fmt::format("replication slot \"{}\" was invalidated (wal_status = lost): the WAL it needed is gone "
                      "(max_slot_wal_keep_size). Events after {} may be missing from Kafka; drop and recreate the "
                      "slot, then reconcile",
                      pg.slot, slot->confirmed_flush.to_string()),
          "55000");
    }
    if (!slot->database.empty() && !identity.dbname.empty() && slot->database != identity.dbname) {
      throw replication::PgError(fmt::format("replication slot \"{}\" belongs to database {}, not {}", pg.slot,
                                             slot->database, identity.dbname),
                                 "55000");
    }
  }
  replication::StartOptions start;
  start.slot = pg.slot;
  start.publications = {pg.publication};
  start.proto_version = features.proto_version;
  start.messages = features.messages;
  connection_->start_replication(start);
  spdlog::info("streaming from slot {} (server {}, proto_version {}, system {})", pg.slot,
               connection_->server_version(), start.proto_version, identity.system_id);
}

Outcome Relay::run() {
  try {
    connect();
  } catch (const replication::PgError& e) {
    return classify(e);
  }
  try {
    auto settings = producer_settings();
    settings.on_statistics = [this](std::string_view json) { observer_.kafka_statistics(json); };
    settings.on_brokers_up = [this](bool up) {
      // librdkafka reconnects by itself and keeps every record queued meanwhile (I1); this only
      // tells the operator when the state changes.
      if (kafka_up_ != up) {
        if (up && kafka_up_) spdlog::info("kafka: a broker is reachable again; queued records are being delivered");
        kafka_up_ = up;
      }
      observer_.kafka_up(up);
    };
    producer_ = std::make_unique<kafka::Producer>(settings, [this](const kafka::DeliveryReport& r) { on_report(r); });
  } catch (const std::invalid_argument& e) {
    return Outcome::fatal(Fatal::kafka_config, e.what());
  }
  reports_.emplace(io_, ::dup(producer_->report_fd()));
  wait_reports(*producer_, *reports_);

  replication::StreamHandler& handler = *this;
  stream_ = std::make_unique<replication::Stream>(io_, *connection_, handler,
                                                  replication::StreamOptions{config_.postgres.status_interval});
  stream_->start([this](const replication::StreamEnd& end) {
    if (pending_outcome_) {
      outcome_ = pending_outcome_;
      return;
    }
    if (end.reason == replication::StreamEnd::Reason::stopped) {
      outcome_ = Outcome::stopped();
      return;
    }
    const replication::PgError as_error(end.message.empty() ? "the server ended the replication stream" : end.message,
                                        end.sqlstate);
    outcome_ = classify(as_error);
  });

  arm_poll();

  streaming_ = true;
  observer_.session_started();
  try {
    io_.restart();
    while (!outcome_) io_.run_one();
  } catch (const std::exception& e) {
    outcome_ = Outcome::fatal(Fatal::internal, std::string("internal error: ") + e.what());
  }
  streaming_ = false;
  observer_.session_ended();
  poll_timer_.cancel();
  stop_deadline_.cancel();
  retry_timer_.cancel();
  stream_.reset();
  reports_->cancel();
  if (isolated_reports_) isolated_reports_->cancel();
  connection_.reset();
  return *outcome_;
}

void Relay::stop() {
  if (stopping_ || !stream_ || outcome_) return;  // run() only posts work once the stream exists
  stopping_ = true;
  spdlog::info("stopping: no more reading; waiting up to {} ms for {} outstanding record(s)",
               config_.shutdown_timeout.count(), tracker_.outstanding_records());
  stream_->pause();
  stop_deadline_.expires_after(config_.shutdown_timeout);
  stop_deadline_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    spdlog::warn("shutdown timeout: {} record(s) still unacknowledged; they will be sent again after a restart",
                 tracker_.outstanding_records());
    finish(Outcome::stopped("shutdown timeout"));
  });
  maybe_finish_stop();
}

void Relay::maybe_finish_stop() {
  if (stopping_ && !closing_ && tracker_.outstanding_records() == 0) finish(Outcome::stopped());
}

void Relay::finish(Outcome outcome) {
  if (closing_) return;
  closing_ = true;
  stop_deadline_.cancel();
  // Confirm exactly what is durable, then close the copy cleanly. Nothing unacknowledged is
  // ever confirmed, whatever the reason for closing (I2).
  update_flush();
  pending_outcome_ = std::move(outcome);
  stream_->stop();
}

// A safety net beside the report pipe: serve librdkafka's queue and notice fatal errors.
void Relay::arm_poll() {
  poll_timer_.expires_after(200ms);
  poll_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || outcome_) return;
    producer_->poll();
    if (isolated_) isolated_->poll();
    check_producer_fatal();
    arm_poll();
  });
}

// librdkafka's idempotence state was lost: nothing beyond the last fully acknowledged
// transaction is confirmed, and the session is rebuilt from the slot's confirmed position.
bool Relay::check_producer_fatal() {
  auto fatal = producer_->fatal_error();
  if (!fatal && isolated_) fatal = isolated_->fatal_error();
  if (!fatal) return false;
  finish(Outcome::reconnect("the Kafka producer hit a fatal error (" + *fatal +
                                                "); rebuilding it and resuming from the slot's confirmed position"));
  return true;
}

void Relay::wait_reports(kafka::Producer& producer, boost::asio::posix::stream_descriptor& reports) {
  reports.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                     [this, &producer, &reports](const boost::system::error_code& ec) {
                       if (ec) return;
                       producer.drain_report_fd();
                       producer.poll();
                       wait_reports(producer, reports);
                     });
}

kafka::ProducerSettings Relay::producer_settings() const {
  kafka::ProducerSettings settings;
  settings.brokers = config_.kafka.brokers;
  settings.properties = config_.kafka.properties;
  settings.max_in_flight_records = config_.limits.max_in_flight_records;
  settings.max_in_flight_bytes = config_.limits.max_in_flight_bytes;
  return settings;
}

// Kafka refuses a whole batch when one record in it is refused (e.g. too large), so a verdict
// about one record needs a batch of one: retries and dead-letter writes go through a second
// producer that sends every record alone. Created at the first refusal; most sessions never
// need it.
kafka::Producer& Relay::isolated() {
  if (!isolated_) {
    auto settings = producer_settings();
    settings.properties["batch.num.messages"] = "1";
    settings.properties["linger.ms"] = "0";
    settings.properties["client.id"] = "pgoutbox-isolated";
    isolated_ = std::make_unique<kafka::Producer>(settings, [this](const kafka::DeliveryReport& r) { on_report(r); });
    isolated_reports_.emplace(io_, ::dup(isolated_->report_fd()));
    wait_reports(*isolated_, *isolated_reports_);
  }
  return *isolated_;
}

void Relay::update_flush() {
  if (!stream_) return;
  const Lsn durable = tracker_.durable();
  if (durable != reported_flush_) {
    reported_flush_ = durable;
    observer_.confirmed_lsn(durable);
  }
  stream_->set_flush(durable);
}

void Relay::apply_backpressure() {
  const auto& limits = config_.limits;
  const auto records = tracker_.outstanding_records();
  if (!stream_->paused()) {
    if (records >= limits.max_in_flight_records || in_flight_bytes_ >= limits.max_in_flight_bytes) {
      stream_->pause();
      ++counters_.pauses;
      observer_.paused(true);
    }
    return;
  }
  if (stopping_ || closing_) return;
  if (static_cast<double>(records) <= static_cast<double>(limits.max_in_flight_records) * limits.resume_ratio &&
      static_cast<double>(in_flight_bytes_) <= static_cast<double>(limits.max_in_flight_bytes) * limits.resume_ratio) {
    stream_->resume();
    observer_.paused(false);
  }
}

void Relay::on_keepalive(const replication::Keepalive& keepalive) {
  if (closing_) return;
  tracker_.idle_position(keepalive.wal_end);
  update_flush();
}

void Relay::on_data(const replication::XLogData& data) {
  if (closing_) return;
  observer_.received_lsn(data.wal_end);
  const auto decoded = pgoutput::decode(data.payload);
  if (!decoded) {
    finish(Outcome::fatal(Fatal::internal, "cannot decode the replication stream: " + decoded.error().to_string()));
    return;
  }
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, pgoutput::BeginData>) {
          txn_ = tracker_.begin(pgoutput::to_unix_micros(m.commit_time), m.final_lsn);
          txn_context_ = {m.final_lsn, pgoutput::to_unix_micros(m.commit_time), m.xid};
        } else if constexpr (std::is_same_v<T, pgoutput::CommitData>) {
          if (!txn_) throw std::logic_error("Commit without Begin in the replication stream");
          tracker_.commit(*txn_, m.end_lsn);
          txn_.reset();
          ++counters_.transactions;
          update_flush();
        } else if constexpr (std::is_same_v<T, pgoutput::RelationData>) {
          relations_.apply(m);
        } else if constexpr (std::is_same_v<T, pgoutput::InsertData>) {
          on_insert(m);
        } else if constexpr (std::is_same_v<T, pgoutput::UpdateData> || std::is_same_v<T, pgoutput::DeleteData> ||
                             std::is_same_v<T, pgoutput::TruncateData> || std::is_same_v<T, pgoutput::MessageData>) {
          ++counters_.changes_ignored;
        } else if constexpr (std::is_same_v<T, pgoutput::TypeData> || std::is_same_v<T, pgoutput::OriginData>) {
          // Descriptions only.
        } else {
          // Streaming and two-phase messages come only when asked for, and pgoutbox does not ask.
          const auto kind = static_cast<char>(data.payload[0]);  // decoded, so not empty
          throw std::logic_error(fmt::format("unexpected pgoutput message '{}' ({})", kind, pgoutput::kind_name(kind)));
        }
      },
      decoded.message());
}

void Relay::on_insert(const pgoutput::InsertData& insert) {
  const auto* relation = relations_.find(insert.relid);
  if (relation == nullptr || !txn_) throw std::logic_error(fmt::format("Insert for relid {} out of sequence", insert.relid));
  const outbox::ResolvedTable* table = nullptr;
  try {
    table = mapping_.resolve(*relation);
  } catch (const outbox::MappingError& e) {
    finish(Outcome::fatal(Fatal::mapping, e.what()));
    return;
  }
  if (table == nullptr) {
    ++counters_.rows_ignored;
    return;
  }
  ++counters_.rows_received;
  auto built = table->build(insert.new_tuple, txn_context_);
  if (auto* poison = std::get_if<outbox::Poison>(&built)) {
    // A row that cannot become a record is handled by the policy at once: sending it again
    // would not change it. Like any record it is outstanding until handled (I2).
    track(*txn_, poison->record);
    apply_policy(poison->record, *txn_, poison->code,
                 fmt::format("{} (table {}.{})", poison->reason, relation->nspname, relation->relname), 0);
    return;
  }
  const auto& record = std::get<outbox::Record>(built);
  track(*txn_, record);
  observer_.event_received(record.topic);
  send(record, DeliveryCookie{*txn_, 0, false, false});
  apply_backpressure();
}

void Relay::track(ConfirmTracker::TxnId txn, const outbox::Record& record) {
  tracker_.add_record(txn);
  in_flight_bytes_ += record.weight();
  ++counters_.records_produced;
  observer_.in_flight(tracker_.outstanding_records(), in_flight_bytes_);
}

void Relay::send(const outbox::Record& record, DeliveryCookie cookie) {
  kafka::Producer& producer = cookie.isolated || cookie.dead_letter ? isolated() : *producer_;
  for (;;) {
    rd_kafka_resp_err_t error = RD_KAFKA_RESP_ERR_NO_ERROR;
    const auto produced = producer.produce(record, cookie.pack(), error);
    if (produced == kafka::Producer::Produced::ok) return;
    if (produced == kafka::Producer::Produced::queue_full) {
      // librdkafka's queue is sized above the in-flight caps, so this is rare: wait for room.
      producer.poll(100ms);
      continue;
    }
    // Refused before sending (e.g. larger than message.max.bytes): the same path as a failed
    // delivery report, so the same policy applies.
    on_failure(record, cookie, error);
    return;
  }
}

void Relay::complete(ConfirmTracker::TxnId txn, std::size_t weight) {
  tracker_.ack(txn);
  in_flight_bytes_ -= std::min<std::uint64_t>(in_flight_bytes_, weight);
  observer_.in_flight(tracker_.outstanding_records(), in_flight_bytes_);
  if (closing_) return;
  update_flush();
  apply_backpressure();
  maybe_finish_stop();
}

void Relay::on_report(const kafka::DeliveryReport& report) {
  const auto cookie = DeliveryCookie::unpack(report.cookie);
  if (!report.ok()) {
    if (report.record) on_failure(*report.record, cookie, report.error);
    return;
  }
  if (cookie.dead_letter) {
    ++counters_.dead_lettered;
    observer_.event_poison(report.record ? report.record->topic : report.topic, PoisonAction::dead_lettered);
  } else {
    ++counters_.records_acked;
    const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    const auto latency = std::max<std::int64_t>(0, now_us - tracker_.commit_time_us(cookie.txn));
    observer_.event_published(report.topic, std::chrono::microseconds(latency));
  }
  complete(cookie.txn, report.weight);
}

// The one place that decides what a failed delivery means for the record (SPEC.md I8).
void Relay::on_failure(const outbox::Record& record, DeliveryCookie cookie, rd_kafka_resp_err_t error) {
  if (closing_) return;  // nothing more is sent; it stays unconfirmed and comes again after a restart
  if (check_producer_fatal()) return;
  const auto kind = kafka::classify(error);
  if (kind == kafka::DeliveryFailure::fatal) {
    finish(Outcome::reconnect(fmt::format("the Kafka producer hit error {}; rebuilding it and resuming from the "
                                          "slot's confirmed position",
                                          rd_kafka_err2name(error))));
    return;
  }
  const std::string code = rd_kafka_err2name(error);
  const std::string text = rd_kafka_err2str(error);
  if (cookie.dead_letter) {
    if (kind == kafka::DeliveryFailure::retriable) {
      schedule_retry(record, cookie, config_.poison.retry_backoff);
      return;
    }
    // The dead-letter topic refuses it too: nothing safe is left but to stop unconfirmed.
    log_event(spdlog::level::err, record, cookie.txn,
              fmt::format("the dead-letter topic {} refused a poison record: {} ({})", record.topic, text, code));
    observer_.event_poison(record.topic, PoisonAction::stopped);
    finish(Outcome::fatal(Fatal::poison, fmt::format("cannot dead-letter event {} to {}: {} ({})",
                                                     record.event_id, record.topic, text, code)));
    return;
  }
  if (kind == kafka::DeliveryFailure::retriable) {
    // librdkafka retries these itself; one that still comes back is sent again, without limit.
    log_event(spdlog::level::warn, record, cookie.txn, fmt::format("delivery failed ({}: {}); sending it again", code, text));
    schedule_retry(record, cookie, config_.poison.retry_backoff);
    return;
  }
  if (!cookie.isolated) {
    // Refused in a batch: perhaps for another record of that batch. Its own first attempt
    // is the send alone, at once.
    schedule_retry(record, DeliveryCookie{cookie.txn, 0, false, true}, 0ms);
    return;
  }
  if (cookie.attempt < config_.poison.max_retries) {
    ++counters_.poison_retried;
    observer_.event_poison(record.topic, PoisonAction::retried);
    auto delay = config_.poison.retry_backoff;
    for (std::uint32_t i = 0; i < cookie.attempt && delay < config_.reconnect.max; ++i) delay *= 2;
    delay = std::min(delay, std::max(config_.reconnect.max, config_.poison.retry_backoff));
    log_event(spdlog::level::warn, record, cookie.txn,
              fmt::format("Kafka refused the record ({}: {}); retry {} of {} in {} ms", code, text, cookie.attempt + 1,
                          config_.poison.max_retries, delay.count()));
    schedule_retry(record, DeliveryCookie{cookie.txn, cookie.attempt + 1, false, true}, delay);
    return;
  }
  apply_policy(record, cookie.txn, code, text, cookie.attempt + 1);
}

void Relay::apply_policy(const outbox::Record& record, ConfirmTracker::TxnId txn, const std::string& code,
                         const std::string& reason, std::uint32_t attempts) {
  switch (config_.poison.policy) {
    case config::PoisonPolicy::stop:
      log_event(spdlog::level::err, record, txn,
                fmt::format("poison record ({}: {}) after {} attempt(s); policy stop: exiting without confirming it",
                            code, reason, attempts));
      observer_.event_poison(record.topic, PoisonAction::stopped);
      finish(Outcome::fatal(Fatal::poison,
                            fmt::format("poison record, event id {}, topic {}: {} ({}). Fix the cause, or set "
                                        "poison.policy: dead-letter, and restart: it is read again",
                                        record.event_id.empty() ? "(none)" : record.event_id,
                                        record.topic.empty() ? "(none)" : record.topic, reason, code)));
      return;
    case config::PoisonPolicy::skip:
      log_event(spdlog::level::warn, record, txn,
                fmt::format("poison record ({}: {}) after {} attempt(s); policy skip: dropped", code, reason, attempts));
      ++counters_.skipped;
      observer_.event_poison(record.topic, PoisonAction::skipped);
      complete(txn, record.weight());
      return;
    case config::PoisonPolicy::dead_letter: {
      log_event(spdlog::level::warn, record, txn,
                fmt::format("poison record ({}: {}) after {} attempt(s); sending it to {}", code, reason, attempts,
                            config_.poison.dead_letter_topic));
      const auto dlq = dead_letter_record(record, config_.poison.dead_letter_topic,
                                          DeadLetterCause{reason, code, attempts, tracker_.commit_lsn(txn)});
      send(dlq, DeliveryCookie{txn, 0, true, true});
      return;
    }
  }
}

void Relay::schedule_retry(const outbox::Record& record, DeliveryCookie cookie, std::chrono::milliseconds delay) {
  retries_.emplace(std::chrono::steady_clock::now() + delay, PendingRetry{record, cookie});
  arm_retry();
}

void Relay::arm_retry() {
  if (retries_.empty()) return;
  retry_timer_.expires_at(retries_.begin()->first);
  retry_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || closing_) return;
    const auto now = std::chrono::steady_clock::now();
    while (!retries_.empty() && retries_.begin()->first <= now) {
      auto node = retries_.extract(retries_.begin());
      send(node.mapped().record, node.mapped().cookie);
      if (closing_) return;
    }
    arm_retry();
  });
}

void Relay::log_event(spdlog::level::level_enum level, const outbox::Record& record, ConfirmTracker::TxnId txn,
                      const std::string& message) const {
  std::string_view trace_id;
  for (const auto& h : record.headers) {
    if (h.name == "traceparent") trace_id = logging::trace_id_from_traceparent(h.value);
  }
  logging::event(level,
                 logging::EventFields{record.event_id, record.key ? std::string_view(*record.key) : std::string_view(),
                                      record.topic, trace_id, tracker_.commit_lsn(txn)},
                 message);
}

}  // namespace pgoutbox::relay
