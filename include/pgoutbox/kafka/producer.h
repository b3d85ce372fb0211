#pragma once

// The idempotent Kafka producer (librdkafka). Properties that the delivery invariants rest on
// are fixed here and cannot be overridden: enable.idempotence=true and acks=all (no duplicates
// or reordering from producer retries, I4), and message.timeout.ms=0 — an unbounded delivery
// timeout, so a record whose delivery keeps failing for a retriable reason (broker down) is
// retried by librdkafka in order, forever, and never dropped (I1). Only permanent and fatal
// errors come back as failed delivery reports.
//
// Delivery reports are served by poll(), from the caller's thread; report_fd() becomes readable
// when reports are waiting, so an Asio loop can wait on it next to the replication socket.

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "pgoutbox/kafka/sink.h"
#include "pgoutbox/outbox/record.h"

namespace pgoutbox::kafka {

struct DeliveryReport {
  std::uint64_t cookie = 0;  // what produce() was given
  rd_kafka_resp_err_t error = RD_KAFKA_RESP_ERR_NO_ERROR;
  std::string error_text;
  std::string topic;
  std::int32_t partition = -1;
  std::int64_t offset = -1;
  std::size_t weight = 0;  // key + value bytes
  // On failure (or always, with ProducerSettings::report_records): the record as it was produced
  // (key, value, headers, timestamp, topic), so it can be sent again or dead-lettered without
  // keeping a copy of every record in flight.
  std::optional<outbox::Record> record;
  bool ok() const { return error == RD_KAFKA_RESP_ERR_NO_ERROR; }
};

// How the relay acts on librdkafka's answers: a record's delivery error, a transactional call's
// error and a producer's fatal error. The producer maps librdkafka's errors through these, and
// the simulator (tests/sim) feeds them the codes and flags librdkafka would give, so that these
// decisions are the daemon's in every simulated schedule too.
DeliveryFailure classify(rd_kafka_resp_err_t error);
DeliveryError delivery_error(rd_kafka_resp_err_t error, std::string_view text = {});
// What librdkafka's rd_kafka_error_t of a transactional call says.
struct TxnError {
  rd_kafka_resp_err_t code = RD_KAFKA_RESP_ERR_NO_ERROR;
  bool fatal = false;               // rd_kafka_error_is_fatal
  bool retriable = false;           // rd_kafka_error_is_retriable
  bool txn_requires_abort = false;  // rd_kafka_error_txn_requires_abort
  std::string text;
};
TxnResult txn_result(const TxnError& error);
SinkFatal sink_fatal(rd_kafka_resp_err_t error, std::string_view reason);

// The fix for a failed SASL authentication under these user properties: where the credentials
// come from and where the cluster keeps the mechanism's users; for OAUTHBEARER with
// sasl.oauthbearer.method=oidc, the client at the identity provider, its token endpoint, the
// clocks, and the scope, audience and issuer the broker expects.
std::string authentication_fix(const std::map<std::string, std::string>& properties);

struct ProducerSettings {
  std::string brokers;
  std::map<std::string, std::string> properties;  // user's librdkafka properties
  std::string transactional_id;                   // non-empty: a transactional producer
  // librdkafka's own queue must hold at least what the relay lets be in flight.
  std::uint64_t max_in_flight_records = 20'000;
  std::uint64_t max_in_flight_bytes = 16ULL << 20;
  // Non-zero: the smallest max.message.bytes of the topics this producer writes (topic_limits.h);
  // batch.size is kept under it, so that the broker never refuses a whole batch for its size.
  std::size_t batch_limit = 0;
  // Served by poll(), on the caller's thread: librdkafka's statistics JSON (every
  // statistics.interval.ms, which pgoutbox sets to 5 s unless the user does), and whether any
  // broker is reachable (false on "all brokers down", true again on the next statistics that
  // show a broker UP).
  std::function<void(std::string_view json)> on_statistics;
  std::function<void(bool up)> on_brokers_up;
  // Every report carries its record, acknowledged ones too (the isolated sink's few: the
  // dead-letter record's headers say which table an acknowledged write counts for).
  bool report_records = false;
};

// The librdkafka properties a producer is created with: pgoutbox's throughput-with-low-latency
// defaults, then the user's, then the fixed ones. Throws std::invalid_argument when a user
// property contradicts a fixed one.
std::map<std::string, std::string> effective_properties(const ProducerSettings& settings);

// The batch.size a producer of these settings fills its batches to (batch_limit applied).
std::size_t effective_batch_size(const ProducerSettings& settings);

// The transactional producer's transaction.timeout.ms among `properties` (librdkafka's 60 s when
// unset): the transaction coordinator aborts a transaction open longer than this.
std::chrono::milliseconds transaction_timeout(const std::map<std::string, std::string>& properties);

class Producer {
 public:
  using ReportFn = std::function<void(const DeliveryReport&)>;

  Producer(const ProducerSettings& settings, ReportFn on_report);
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;
  ~Producer();

  enum class Produced { ok, queue_full, failed };
  // Hands the record to librdkafka (copied). On `failed`, `error` says why.
  Produced produce(const outbox::Record& record, std::uint64_t cookie, rd_kafka_resp_err_t& error);

  // Serves delivery reports and errors; returns how many events were served.
  int poll(std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  // A descriptor that becomes readable when poll() has work; drain it with drain_report_fd().
  int report_fd() const { return pipe_read_; }
  void drain_report_fd() const;

  // The idempotent producer's state was lost (e.g. a fenced epoch or an unrecoverable sequence
  // gap): nothing more can be produced by this instance.
  std::optional<SinkFatal> fatal() const;

  // Kafka transactions (a producer with a transactional_id); see Sink.
  TxnResult init_transactions(std::chrono::milliseconds timeout);
  TxnResult begin_transaction();
  TxnResult commit_transaction(std::chrono::milliseconds timeout);
  TxnResult abort_transaction(std::chrono::milliseconds timeout);

  // Sends what is queued at once, ignoring linger.ms; waits (serving reports) for its
  // acknowledgement at most 5 ms, so the caller's thread is barely held.
  void send_now();
  // Waits for everything in flight (serving reports); false on timeout.
  bool flush(std::chrono::milliseconds timeout);
  std::uint64_t queued() const;

 private:
  static void on_delivery(rd_kafka_t* rk, const rd_kafka_message_t* msg, void* opaque);
  static void on_error(rd_kafka_t* rk, int err, const char* reason, void* opaque);
  static int on_stats(rd_kafka_t* rk, char* json, size_t json_len, void* opaque);
  static void on_log(const rd_kafka_t* rk, int level, const char* facility, const char* message);

  rd_kafka_topic_t* topic(const std::string& name);

  ReportFn on_report_;
  // Topic handles by name, so producing does not look the topic up by name every time.
  std::unordered_map<std::string, rd_kafka_topic_t*> topics_;
  std::function<void(std::string_view)> on_statistics_;
  std::function<void(bool)> on_brokers_up_;
  std::string authentication_fix_;
  bool report_records_;
  rd_kafka_t* rk_ = nullptr;
  int pipe_read_ = -1;
  int pipe_write_ = -1;
};

}  // namespace pgoutbox::kafka
