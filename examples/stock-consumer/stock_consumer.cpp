#include "stock_consumer.h"

#include <spdlog/spdlog.h>

#include <stdexcept>

#include "db_failure.h"
#include "stop_signal.h"

namespace shop {

namespace {

std::optional<std::string_view> header(const rd_kafka_message_t& record, const char* name) {
  rd_kafka_headers_t* headers = nullptr;
  if (rd_kafka_message_headers(&record, &headers) != RD_KAFKA_RESP_ERR_NO_ERROR) return std::nullopt;
  const void* value = nullptr;
  size_t size = 0;
  if (rd_kafka_header_get_last(headers, name, &value, &size) != RD_KAFKA_RESP_ERR_NO_ERROR) return std::nullopt;
  return std::string_view(static_cast<const char*>(value), size);
}

KafkaHeaders all_headers(const rd_kafka_message_t& record) {
  KafkaHeaders out;
  rd_kafka_headers_t* headers = nullptr;
  if (rd_kafka_message_headers(&record, &headers) != RD_KAFKA_RESP_ERR_NO_ERROR) return out;
  const char* name = nullptr;
  const void* value = nullptr;
  size_t size = 0;
  for (size_t i = 0; rd_kafka_header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i) {
    out.emplace_back(name, value != nullptr ? std::string(static_cast<const char*>(value), size) : std::string());
  }
  return out;
}

std::optional<std::string_view> key_of(const rd_kafka_message_t& record) {
  if (record.key == nullptr) return std::nullopt;
  return std::string_view(static_cast<const char*>(record.key), record.key_len);
}

std::optional<std::string_view> value_of(const rd_kafka_message_t& record) {
  if (record.payload == nullptr) return std::nullopt;
  return std::string_view(static_cast<const char*>(record.payload), record.len);
}

void set(rd_kafka_conf_t* conf, const char* name, const std::string& value) {
  char error[512];
  if (rd_kafka_conf_set(conf, name, value.c_str(), error, sizeof error) != RD_KAFKA_CONF_OK) {
    rd_kafka_conf_destroy(conf);
    throw std::runtime_error(std::string("kafka property ") + name + ": " + error);
  }
}

}  // namespace

StockConsumer::StockConsumer(ConsumerSettings settings)
    : settings_(std::move(settings)), db_(settings_.dsn), store_(db_, settings_.group), side_(settings_.brokers) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  // The caller's extra properties first: the ones below carry the guarantees and win.
  for (const auto& [name, value] : settings_.kafka_properties) set(conf, name.c_str(), value);
  set(conf, "bootstrap.servers", settings_.brokers);
  set(conf, "group.id", settings_.group);
  set(conf, "auto.offset.reset", "earliest");
  // Only records of committed Kafka transactions (pgoutbox's delivery: exactly-once): aborted
  // ones are never seen. librdkafka's default, said here because Java's is read_uncommitted.
  set(conf, "isolation.level", "read_committed");
  // Offsets move only when we say so, after the local transaction committed (seeds: never
  // "ACK first, process later"). auto.offset.store=false: poll() must not mark a record as
  // done by merely handing it out.
  set(conf, "enable.auto.commit", "false");
  set(conf, "enable.auto.offset.store", "false");
  // A record may sit in its retry schedule this long without polling; the group must not
  // evict us meanwhile.
  const auto poll_interval =
      std::max<std::chrono::milliseconds>(settings_.retry.total() + std::chrono::minutes(1), std::chrono::minutes(5));
  set(conf, "max.poll.interval.ms", std::to_string(poll_interval.count()));
  char error[512];
  rk_ = rd_kafka_new(RD_KAFKA_CONSUMER, conf, error, sizeof error);
  if (rk_ == nullptr) {
    rd_kafka_conf_destroy(conf);
    throw std::runtime_error(std::string("kafka consumer: ") + error);
  }
  rd_kafka_poll_set_consumer(rk_);
  rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(topics, settings_.topic.c_str(), RD_KAFKA_PARTITION_UA);
  const auto subscribed = rd_kafka_subscribe(rk_, topics);
  rd_kafka_topic_partition_list_destroy(topics);
  if (subscribed != RD_KAFKA_RESP_ERR_NO_ERROR) {
    rd_kafka_destroy(rk_);
    throw std::runtime_error(std::string("subscribe: ") + rd_kafka_err2str(subscribed));
  }
}

StockConsumer::~StockConsumer() {
  rd_kafka_consumer_close(rk_);
  rd_kafka_destroy(rk_);
}

int StockConsumer::run() {
  int exit_code = 0;
  auto next_stats = std::chrono::steady_clock::now();
  while (!stop_requested()) {
    if (std::chrono::steady_clock::now() >= next_stats) {
      write_stats();
      next_stats = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    }
    rd_kafka_message_t* record = rd_kafka_consumer_poll(rk_, 200);
    if (record == nullptr) continue;
    if (record->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (record->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
        spdlog::warn("consumer: {}", rd_kafka_message_errstr(record));
      rd_kafka_message_destroy(record);
      continue;
    }
    Disposition disposition = Disposition::stop;
    try {
      disposition = handle(*record);
    } catch (const std::exception& e) {
      spdlog::error("topic={} partition={} offset={} result=fatal error=\"{}\" (offset not committed; fix and restart)",
                    rd_kafka_topic_name(record->rkt), record->partition, record->offset, e.what());
      exit_code = 3;
    }
    if (disposition == Disposition::done) mark_done(*record);
    rd_kafka_message_destroy(record);
    if (disposition == Disposition::stop) break;
  }
  // Commit what is done, synchronously, before leaving the group.
  const auto committed = rd_kafka_commit(rk_, nullptr, 0);
  if (committed != RD_KAFKA_RESP_ERR_NO_ERROR && committed != RD_KAFKA_RESP_ERR__NO_OFFSET) {
    spdlog::warn("final offset commit: {} (those records come again and are skipped as duplicates)",
                 rd_kafka_err2str(committed));
  }
  write_stats();
  spdlog::info("stopped: handled={} applied={} duplicates={} rejected={} dead_lettered={} retries={}", stats_.handled,
               stats_.applied, stats_.duplicates, stats_.rejected, stats_.dead_lettered, stats_.retries);
  return exit_code;
}

StockConsumer::Disposition StockConsumer::handle(const rd_kafka_message_t& record) {
  const auto value = value_of(record);
  ParsedEvent parsed = parse_stock_event(value.value_or(std::string_view()), header(record, "id"));
  if (!parsed.event) return dead_letter(record, "malformed: " + parsed.error);
  const StockEvent& event = *parsed.event;

  ApplyOutcome outcome = ApplyOutcome::applied;
  std::string error;
  switch (with_retries(
      event, [&] { outcome = store_.apply(event); }, error)) {
    case Attempt::stopped:
      return Disposition::stop;
    case Attempt::exhausted:
      return dead_letter(record, "transient failure, retries used up: " + error);
    case Attempt::ok:
      break;
  }
  switch (outcome) {
    case ApplyOutcome::applied:
      ++stats_.applied;
      spdlog::debug("msg_id={} order_id={} sku={} quantity={} result=applied", event.msg_id, event.order_id, event.sku,
                    event.quantity);
      return Disposition::done;
    case ApplyOutcome::duplicate:
      ++stats_.duplicates;
      spdlog::info("msg_id={} order_id={} result=duplicate (already in consumer_log, skipped)", event.msg_id,
                   event.order_id);
      return Disposition::done;
    case ApplyOutcome::insufficient_stock:
      return reject(record, event, "insufficient stock");
    case ApplyOutcome::unknown_sku:
      return reject(record, event, "unknown sku");
  }
  return Disposition::stop;
}

StockConsumer::Disposition StockConsumer::reject(const rd_kafka_message_t& record, const StockEvent& event,
                                                 const std::string& reason) {
  // A business error: retrying would fail the same way. Tell the order side (a compensating
  // event it can act on, e.g. cancel the order), then record the rejection. In that order: a
  // crash between the two sends the event again with the same id, it never loses it.
  const KafkaHeaders headers{{"id", "rejected:" + event.msg_id},
                             {"type", "StockRejected"},
                             {"reason", reason},
                             {"causation_id", event.msg_id}};
  if (!side_.send(settings_.reject_topic, key_of(record), value_of(record), headers)) return Disposition::stop;
  std::string error;
  switch (with_retries(
      event, [&] { store_.record_rejection(event, reason); }, error)) {
    case Attempt::stopped:
      return Disposition::stop;
    case Attempt::exhausted:
      return dead_letter(record, "transient failure, retries used up: " + error);
    case Attempt::ok:
      break;
  }
  ++stats_.rejected;
  spdlog::info("msg_id={} order_id={} sku={} quantity={} result=rejected reason=\"{}\" topic={}", event.msg_id,
               event.order_id, event.sku, event.quantity, reason, settings_.reject_topic);
  return Disposition::done;
}

StockConsumer::Disposition StockConsumer::dead_letter(const rd_kafka_message_t& record, const std::string& reason) {
  // The original key, value and headers, plus where it came from and why it is here.
  KafkaHeaders headers = all_headers(record);
  headers.emplace_back("dlq.error", reason);
  headers.emplace_back("dlq.topic", rd_kafka_topic_name(record.rkt));
  headers.emplace_back("dlq.partition", std::to_string(record.partition));
  headers.emplace_back("dlq.offset", std::to_string(record.offset));
  headers.emplace_back("dlq.consumer", settings_.group);
  if (!side_.send(settings_.dlq_topic, key_of(record), value_of(record), headers)) return Disposition::stop;
  ++stats_.dead_lettered;
  spdlog::warn("msg_id={} topic={} partition={} offset={} result=dead-lettered to={} error=\"{}\"",
               header(record, "id").value_or("?"), rd_kafka_topic_name(record.rkt), record.partition, record.offset,
               settings_.dlq_topic, reason);
  return Disposition::done;
}

StockConsumer::Attempt StockConsumer::with_retries(const StockEvent& event, const std::function<void()>& step,
                                                   std::string& last_error) {
  for (std::size_t retry = 0;; ++retry) {
    try {
      db_.ensure_connected();
      step();
      return Attempt::ok;
    } catch (const PgError& e) {
      if (classify(e) == DbFailure::fatal) throw;
      last_error = e.what();
      const auto delay = settings_.retry.delay_before_retry(retry);
      if (!delay) return Attempt::exhausted;
      ++stats_.retries;
      write_stats();  // a record in its retry schedule keeps us from the poll loop for minutes
      spdlog::warn("msg_id={} order_id={} result=retry in={}ms sqlstate={} error=\"{}\"", event.msg_id, event.order_id,
                   delay->count(), e.sqlstate(), e.what());
      if (!sleep_unless_stopped(*delay)) return Attempt::stopped;
    }
  }
}

void StockConsumer::mark_done(const rd_kafka_message_t& record) {
  ++stats_.handled;
  const char* topic = rd_kafka_topic_name(record.rkt);
  next_offsets_[{topic, record.partition}] = record.offset + 1;
  // Store, then commit asynchronously: a commit lost to a broker outage or a crash only means
  // those records come again, and consumer_log skips them.
  rd_kafka_topic_partition_list_t* offsets = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(offsets, topic, record.partition)->offset = record.offset + 1;
  rd_kafka_offsets_store(rk_, offsets);
  rd_kafka_topic_partition_list_destroy(offsets);
  rd_kafka_commit(rk_, nullptr, 1);
}

void StockConsumer::write_stats() {
  if (settings_.stats_file.empty()) return;
  refresh_lag();
  stats_.write_file(settings_.stats_file);
}

void StockConsumer::refresh_lag() {
  rd_kafka_topic_partition_list_t* assigned = nullptr;
  if (rd_kafka_assignment(rk_, &assigned) != RD_KAFKA_RESP_ERR_NO_ERROR) return;
  rd_kafka_position(rk_, assigned);
  std::int64_t lag = 0;
  for (int i = 0; i < assigned->cnt; ++i) {
    const auto& tp = assigned->elems[i];
    int64_t low = 0, high = 0;
    // Cached from fetch responses: no request to the broker.
    if (rd_kafka_get_watermark_offsets(rk_, tp.topic, tp.partition, &low, &high) != RD_KAFKA_RESP_ERR_NO_ERROR)
      continue;
    const auto handled = next_offsets_.find({tp.topic, tp.partition});
    const int64_t position = handled != next_offsets_.end() ? handled->second : (tp.offset >= 0 ? tp.offset : low);
    if (high > position) lag += high - position;
  }
  rd_kafka_topic_partition_list_destroy(assigned);
  stats_.lag = lag;
}

}  // namespace shop
