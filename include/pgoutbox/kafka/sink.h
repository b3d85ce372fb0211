#pragma once

// The relay's Kafka edge: what it needs from a producer, without librdkafka's types, so the
// relay can be driven by a fake sink in unit tests. The real sink wraps kafka::Producer
// (producer_sink.h).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "pgoutbox/outbox/record.h"

namespace pgoutbox::kafka {

// What a failed delivery means (docs/spec.md I8), decided once, where librdkafka's codes are known.
enum class DeliveryFailure {
  retriable,  // transient (broker down, leader change, timeout): send again, never give up
  permanent,  // this record will not be accepted as it is (too large, invalid, not authorised, no topic)
  fatal,      // the producer itself is unusable (idempotence state lost): rebuild it
  fenced,     // exactly-once: another producer with the same transactional.id took over
};

// Why a sink can produce nothing more, decided where librdkafka's codes are known.
struct SinkFatal {
  enum class Kind {
    fenced,       // another producer with the same transactional.id took over: write nothing more
    idempotence,  // the idempotent producer's sequence or epoch is broken: rebuild it
    // A batch was refused for good by a producer opened with SinkOptions::gapless: it stopped, so
    // that nothing after the batch in its partition is written; the batch's records report the
    // broker's error (after this state is set). Rebuild it and send them again in their place.
    gap,
    other,  // any other fatal error librdkafka reports: rebuild it
  };
  Kind kind = Kind::other;
  std::string text;  // librdkafka's error name and reason, for the log
};

struct DeliveryError {
  DeliveryFailure kind = DeliveryFailure::retriable;
  std::string code;  // librdkafka's error name, e.g. MSG_SIZE_TOO_LARGE
  std::string text;
  bool size_refusal = false;  // the record (or its batch) is too large: a copy of it would be too
};

struct Delivery {
  std::uint64_t cookie = 0;  // what produce() was given
  std::optional<DeliveryError> error;
  std::string topic;
  std::size_t weight = 0;  // key + value bytes
  // On failure (and on every report of an isolated sink): the record as it was produced, so it
  // can be sent again or dead-lettered, and an acknowledged dead-letter write counted by table.
  std::optional<outbox::Record> record;
  bool ok() const { return !error; }
};

// What a step of a Kafka transaction came to (exactly-once; docs/spec.md I10).
enum class TxnStatus {
  ok,
  retry,   // timed out, nothing decided: call again
  abort,   // the transaction cannot commit: abort it, and publish its records again
  fenced,  // another producer with the same transactional.id took over: this one writes nothing more
  fatal,   // the producer is unusable: rebuild it
};

struct TxnResult {
  TxnStatus status = TxnStatus::ok;
  std::string message;
  bool ok() const { return status == TxnStatus::ok; }
};

class Sink {
 public:
  virtual ~Sink() = default;
  enum class Produced { ok, queue_full, failed };
  // Hands the record over (copied). On `failed`, `error` says why.
  virtual Produced produce(const outbox::Record& record, std::uint64_t cookie, DeliveryError& error) = 0;
  // Serves delivery reports (through the callback given at creation) and other events.
  virtual void poll() = 0;
  // Sends what is queued without waiting out linger.ms (the stream is caught up: nothing more
  // is coming to batch it with). May serve reports, like poll().
  virtual void send_now() {}
  // Sends everything queued and waits up to `timeout` for its reports (serving them); false on
  // the timeout. Exactly-once sends a suspect record in a batch of its own between two flushes.
  virtual bool flush(std::chrono::milliseconds /*timeout*/) { return true; }
  // Readable when poll() has work; drain_wakeup() empties it.
  virtual int wakeup_fd() const = 0;
  virtual void drain_wakeup() = 0;
  // The sink can produce nothing more: it must be rebuilt, or, fenced, the instance stops.
  virtual std::optional<SinkFatal> fatal() const = 0;

  // Kafka transactions, for a sink opened with SinkOptions::transactional_id. init fences every
  // older producer of the same id and aborts its open transaction; commit first delivers what is
  // still queued (serving reports). A sink without transactions answers fatal.
  virtual TxnResult init_transactions(std::chrono::milliseconds /*timeout*/) { return not_transactional(); }
  virtual TxnResult begin_transaction() { return not_transactional(); }
  virtual TxnResult commit_transaction(std::chrono::milliseconds /*timeout*/) { return not_transactional(); }
  virtual TxnResult abort_transaction(std::chrono::milliseconds /*timeout*/) { return not_transactional(); }

 private:
  static TxnResult not_transactional() { return {TxnStatus::fatal, "the Kafka sink has no transactions"}; }
};

struct SinkOptions {
  // Batches of one: a refusal is about this record alone (retries, dead-letter writes). Its
  // reports all carry their record.
  bool isolated = false;
  std::function<void(const Delivery&)> on_delivery;
  std::function<void(std::string_view json)> on_statistics;  // main sink only
  std::function<void(bool up)> on_brokers_up;                // main sink only
  // Non-empty: a transactional producer with this transactional.id (delivery: exactly-once).
  std::string transactional_id;
  // A batch refused for good stops the producer (SinkFatal::Kind::gap) instead of letting the
  // partition's later batches be written before its records can be sent again (librdkafka's
  // enable.gapless.guarantee; docs/spec.md I4).
  bool gapless = false;
};

// Builds a sink; throws std::invalid_argument on a configuration the client refuses.
using SinkFactory = std::function<std::unique_ptr<Sink>(SinkOptions options)>;

}  // namespace pgoutbox::kafka
