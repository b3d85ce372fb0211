#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "consumer_stats.h"
#include "pg.h"
#include "retry_schedule.h"
#include "side_producer.h"
#include "stock_store.h"

namespace shop {

struct ConsumerSettings {
  std::string brokers;
  std::string topic = "outbox.event.order";
  std::string group = "stock-service";  // also the consumer name in consumer_log
  std::string dsn;                      // the stock database
  std::string dlq_topic = "stock.dlq";
  std::string reject_topic = "stock.rejected";
  RetrySchedule retry = RetrySchedule::production();
  std::string stats_file;                                             // empty: none
  std::vector<std::pair<std::string, std::string>> kafka_properties;  // extra librdkafka properties (TLS, SASL, ...)
};

// The stock service's consumer: a librdkafka consumer group member that handles each record in
// one local transaction and commits the record's offset only after that transaction (or the
// record's trip to a side topic) is done. A crash anywhere repeats records, never skips one;
// consumer_log turns the repeats into no-ops.
class StockConsumer {
 public:
  explicit StockConsumer(ConsumerSettings settings);
  ~StockConsumer();
  StockConsumer(const StockConsumer&) = delete;
  StockConsumer& operator=(const StockConsumer&) = delete;

  // Consumes until SIGINT/SIGTERM (0) or a fatal error (3: offset left uncommitted).
  int run();

 private:
  enum class Disposition { done, stop };  // done: commit the offset; stop: leave it, exit
  enum class Attempt { ok, exhausted, stopped };

  Disposition handle(const rd_kafka_message_t& record);
  Disposition reject(const rd_kafka_message_t& record, const StockEvent& event, const std::string& reason);
  Disposition dead_letter(const rd_kafka_message_t& record, const std::string& reason);
  // Runs a database step, retrying transient failures on the schedule; rethrows fatal ones.
  Attempt with_retries(const StockEvent& event, const std::function<void()>& step, std::string& last_error);
  void mark_done(const rd_kafka_message_t& record);
  void write_stats();
  void refresh_lag();

  ConsumerSettings settings_;
  PgConnection db_;
  StockStore store_;
  SideProducer side_;
  rd_kafka_t* rk_ = nullptr;
  ConsumerStats stats_;
  std::map<std::pair<std::string, int32_t>, int64_t> next_offsets_;  // per partition, after the last handled
};

}  // namespace shop
