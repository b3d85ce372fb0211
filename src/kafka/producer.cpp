#include "pgoutbox/kafka/producer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "pgoutbox/config/kafka_properties.h"
#include "pgoutbox/kafka/topic_limits.h"
#include "pgoutbox/secrets.h"

namespace pgoutbox::kafka {
namespace {
constexpr std::size_t kLibrdkafkaBatchSize = 1'000'000;  // librdkafka's default batch.size

std::size_t batch_size_of(const std::map<std::string, std::string>& props) {
  std::size_t size = kLibrdkafkaBatchSize;
  if (const auto it = props.find("batch.size"); it != props.end()) {
    const auto* end = it->second.data() + it->second.size();
    if (const auto [ptr, ec] = std::from_chars(it->second.data(), end, size); ec != std::errc() || ptr != end)
      size = kLibrdkafkaBatchSize;  // librdkafka refuses it when the producer is created
  }
  return size;
}
}  // namespace

DeliveryFailure classify(rd_kafka_resp_err_t error) {
  switch (error) {
    // The idempotent producer's sequence or epoch is broken: only a new producer can go on.
    case RD_KAFKA_RESP_ERR__FATAL:
    case RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER:
    case RD_KAFKA_RESP_ERR__INCONSISTENT:
    case RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH:
    case RD_KAFKA_RESP_ERR_UNKNOWN_PRODUCER_ID:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
      return DeliveryFailure::fatal;
    // A newer producer with the same transactional.id: this one must write nothing more.
    case RD_KAFKA_RESP_ERR_PRODUCER_FENCED:
    case RD_KAFKA_RESP_ERR__FENCED:
      return DeliveryFailure::fenced;
    // The record itself is refused; sending it unchanged will most likely fail again.
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_RECORD:
    case RD_KAFKA_RESP_ERR_INVALID_TIMESTAMP:
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
    case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
    case RD_KAFKA_RESP_ERR_POLICY_VIOLATION:
    case RD_KAFKA_RESP_ERR_UNSUPPORTED_FOR_MESSAGE_FORMAT:
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
      return DeliveryFailure::permanent;
    default:
      // Timeouts, leader changes, lost connections, purges, full queues and anything new: send
      // it again. Nothing unknown is ever given up on.
      return DeliveryFailure::retriable;
  }
}

DeliveryError delivery_error(rd_kafka_resp_err_t error, std::string_view text) {
  return DeliveryError{.kind = classify(error),
                       .code = rd_kafka_err2name(error),
                       .text = text.empty() ? std::string(rd_kafka_err2str(error)) : std::string(text),
                       .size_refusal = error == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE ||
                                       error == RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE};
}

TxnResult txn_result(const TxnError& error) {
  if (error.code == RD_KAFKA_RESP_ERR_NO_ERROR) return {};
  TxnResult result;
  result.message = redact_secrets(fmt::format("{}: {}", rd_kafka_err2name(error.code), error.text));
  if (error.code == RD_KAFKA_RESP_ERR_PRODUCER_FENCED || error.code == RD_KAFKA_RESP_ERR__FENCED) {
    result.status = TxnStatus::fenced;
  } else if (error.fatal) {
    result.status = TxnStatus::fatal;
  } else if (error.retriable && !error.txn_requires_abort) {
    result.status = TxnStatus::retry;
  } else {
    // Abortable, or a call out of order (a state error): nothing of this transaction can be trusted.
    result.status = TxnStatus::abort;
  }
  return result;
}

SinkFatal sink_fatal(rd_kafka_resp_err_t error, std::string_view reason) {
  SinkFatal fatal;
  fatal.text = redact_secrets(fmt::format("{}: {}", rd_kafka_err2name(error), reason));
  if (error == RD_KAFKA_RESP_ERR__GAPLESS_GUARANTEE) {
    fatal.kind = SinkFatal::Kind::gap;
    return fatal;
  }
  switch (classify(error)) {
    case DeliveryFailure::fenced:
      fatal.kind = SinkFatal::Kind::fenced;
      break;
    case DeliveryFailure::fatal:
      fatal.kind = SinkFatal::Kind::idempotence;
      break;
    default:
      fatal.kind = SinkFatal::Kind::other;
  }
  return fatal;
}

std::map<std::string, std::string> effective_properties(const ProducerSettings& settings) {
  // Throughput with low latency: batches fill for up to 5 ms, lz4 is cheap on CPU, requests
  // leave at once (no Nagle: a small request would otherwise wait for the previous one's TCP
  // ack, up to the kernel's 40 ms delayed ack; Java's producer disables it too), and the
  // partitioner is Java's (murmur2), so a key lands on the same partition as with a Java
  // producer or Debezium.
  std::map<std::string, std::string> props = {
      {"linger.ms", "5"},
      {"compression.type", "lz4"},
      {"batch.num.messages", "10000"},
      {"partitioner", "murmur2_random"},
      {"max.in.flight.requests.per.connection", "5"},
      {"socket.keepalive.enable", "true"},
      {"socket.nagle.disable", "true"},
      {"client.id", "pgoutbox"},
      {"statistics.interval.ms", "5000"},
  };
  props["queue.buffering.max.messages"] =
      std::to_string(std::clamp<std::uint64_t>(settings.max_in_flight_records * 2, 1000, 10'000'000));
  props["queue.buffering.max.kbytes"] =
      std::to_string(std::clamp<std::uint64_t>(settings.max_in_flight_bytes * 2 / 1024, 1024, 2'097'151));
  // Properties the invariants rest on; a user value that differs is refused, not ignored.
  for (const auto& [name, value] : settings.properties) {
    if (const auto refusal = config::refuse_kafka_property(name, value)) {
      throw std::invalid_argument(fmt::format("kafka property {}={} is not allowed: it {}", name, value, *refusal));
    }
    props[name] = value;
  }
  for (const auto& fixed : config::fixed_kafka_properties()) props[std::string(fixed.name)] = fixed.value;
  if (settings.batch_limit > 0) {
    // The broker refuses a whole batch above a topic's max.message.bytes, and librdkafka does
    // not split it (the Java producer does): batches stay under the smallest limit.
    if (const auto under = batch_size_under(settings.batch_limit); under < batch_size_of(props))
      props["batch.size"] = std::to_string(under);
  }
  if (!settings.transactional_id.empty()) props["transactional.id"] = settings.transactional_id;
  props["bootstrap.servers"] = settings.brokers;
  return props;
}

std::size_t effective_batch_size(const ProducerSettings& settings) {
  return batch_size_of(effective_properties(settings));
}

std::chrono::milliseconds transaction_timeout(const std::map<std::string, std::string>& properties) {
  constexpr std::int64_t kLibrdkafkaDefault = 60'000;
  std::int64_t ms = kLibrdkafkaDefault;
  if (const auto it = properties.find("transaction.timeout.ms"); it != properties.end()) {
    const auto* end = it->second.data() + it->second.size();
    // A value librdkafka refuses is refused with its name when the producer is created.
    if (const auto [ptr, ec] = std::from_chars(it->second.data(), end, ms); ec != std::errc() || ptr != end)
      ms = kLibrdkafkaDefault;
  }
  return std::chrono::milliseconds(ms);
}

std::string authentication_fix(const std::map<std::string, std::string>& properties) {
  const auto value = [&](const char* name) {
    const auto it = properties.find(name);
    return it == properties.end() ? std::string() : it->second;
  };
  std::string mechanism = value("sasl.mechanisms").empty() ? value("sasl.mechanism") : value("sasl.mechanisms");
  std::transform(mechanism.begin(), mechanism.end(), mechanism.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (mechanism == "OAUTHBEARER" && value("sasl.oauthbearer.method") == "oidc") {
    // librdkafka fetches the token itself (client-credentials grant, HTTP Basic with the client
    // id and secret), refuses one whose exp has passed ("Must supply an unexpired token"), and the
    // broker checks its signature against its JWKS, its aud and iss, and exp with its clock skew.
    return fmt::format(
        "by the reason: invalid_client or HTTP 401 from the token endpoint: the identity provider does not know "
        "kafka.properties.sasl.oauthbearer.client.id with this secret (PGOUTBOX_KAFKA_PROPERTY_SASL_OAUTHBEARER_"
        "CLIENT_SECRET or kafka.properties.sasl.oauthbearer.client.secret_file), or "
        "sasl.oauthbearer.token.endpoint.url "
        "({}) is not its token endpoint; \"Must supply an unexpired token\": this host's clock and the provider's "
        "disagree (synchronise both with NTP); invalid_token from the broker: the token lacks the scope it needs "
        "(sasl.oauthbearer.scope) or the audience and issuer the listener expects (its "
        "sasl.oauthbearer.expected.audience and expected.issuer), or its signing key is not in the listener's "
        "sasl.oauthbearer.jwks.endpoint.url",
        value("sasl.oauthbearer.token.endpoint.url").empty() ? std::string("not set")
                                                             : value("sasl.oauthbearer.token.endpoint.url"));
  }
  if (mechanism == "OAUTHBEARER") {
    return "set kafka.properties.sasl.oauthbearer.method=oidc with sasl.oauthbearer.client.id, the client secret, "
           "sasl.oauthbearer.token.endpoint.url and sasl.oauthbearer.scope: without it librdkafka only makes "
           "unsecured test tokens (sasl.oauthbearer.config), which a broker validating JWTs refuses";
  }
  return fmt::format(
      "check kafka.properties.sasl.username and the password (PGOUTBOX_KAFKA_PROPERTY_SASL_PASSWORD or "
      "kafka.properties.sasl.password_file), and that the user exists for SASL mechanism {} on the cluster ({})",
      mechanism.empty() ? std::string("GSSAPI") : mechanism,
      mechanism == "PLAIN" ? "Kafka's own PlainLoginModule lists its users as user_<name> entries of the listener's "
                             "sasl.jaas.config"
                           : "kafka-configs.sh --describe --entity-type users");
}

Producer::Producer(const ProducerSettings& settings, ReportFn on_report)
    : on_report_(std::move(on_report)),
      on_statistics_(settings.on_statistics),
      on_brokers_up_(settings.on_brokers_up),
      authentication_fix_(authentication_fix(settings.properties)),
      report_records_(settings.report_records) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (const auto& [name, value] : effective_properties(settings)) {
    if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      throw std::invalid_argument(redact_secrets(fmt::format("kafka property {}: {}", name, err)));
    }
  }
  rd_kafka_conf_set_dr_msg_cb(conf, &Producer::on_delivery);
  rd_kafka_conf_set_error_cb(conf, &Producer::on_error);
  rd_kafka_conf_set_log_cb(conf, &Producer::on_log);
  rd_kafka_conf_set_stats_cb(conf, &Producer::on_stats);
  rd_kafka_conf_set_opaque(conf, this);
  rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (rk_ == nullptr) {
    rd_kafka_conf_destroy(conf);
    throw std::invalid_argument(redact_secrets(fmt::format("cannot create the Kafka producer: {}", err)));
  }
  int fds[2];
  if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) {
    rd_kafka_destroy(rk_);
    throw std::runtime_error("pipe2 failed");
  }
  pipe_read_ = fds[0];
  pipe_write_ = fds[1];
  // librdkafka writes a byte when its main queue (delivery reports, errors) becomes non-empty.
  rd_kafka_queue_t* main_queue = rd_kafka_queue_get_main(rk_);
  static const char kWake = 1;
  rd_kafka_queue_io_event_enable(main_queue, pipe_write_, &kWake, 1);
  rd_kafka_queue_destroy(main_queue);
}

Producer::~Producer() {
  if (rk_ != nullptr) {
    // Whatever is still queued will never be confirmed to Postgres, so it comes again from the
    // slot after a restart: dropping it here loses nothing.
    rd_kafka_purge(rk_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_queue_t* main_queue = rd_kafka_queue_get_main(rk_);
    rd_kafka_queue_io_event_enable(main_queue, -1, nullptr, 0);
    rd_kafka_queue_destroy(main_queue);
    on_report_ = nullptr;
    for (const auto& [name, rkt] : topics_) rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk_);
  }
  if (pipe_read_ >= 0) ::close(pipe_read_);
  if (pipe_write_ >= 0) ::close(pipe_write_);
}

Producer::Produced Producer::produce(const outbox::Record& record, std::uint64_t cookie, rd_kafka_resp_err_t& error) {
  rd_kafka_headers_t* headers = rd_kafka_headers_new(record.headers.size());
  for (const auto& h : record.headers) {
    rd_kafka_header_add(headers, h.name.data(), static_cast<ssize_t>(h.name.size()), h.value.data(),
                        static_cast<ssize_t>(h.value.size()));
  }
  void* value = record.tombstone ? nullptr : const_cast<char*>(record.value.data());
  const std::size_t value_len = record.tombstone ? 0 : record.value.size();
  const void* key = record.key ? record.key->data() : nullptr;
  const std::size_t key_len = record.key ? record.key->size() : 0;
  rd_kafka_topic_t* rkt = topic(record.topic);
  if (rkt == nullptr) {
    rd_kafka_headers_destroy(headers);
    error = rd_kafka_last_error();
    return Produced::failed;
  }
  const auto rc = rd_kafka_producev(
      rk_, RD_KAFKA_V_RKT(rkt), RD_KAFKA_V_KEY(key, key_len), RD_KAFKA_V_VALUE(value, value_len),
      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(headers), RD_KAFKA_V_TIMESTAMP(record.timestamp_ms),
      // The message's opaque carries the integer cookie itself, read back as one.
      // NOLINTNEXTLINE(performance-no-int-to-ptr): the pointer is never dereferenced
      RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(static_cast<std::uintptr_t>(cookie))), RD_KAFKA_V_END);
  if (rc == RD_KAFKA_RESP_ERR_NO_ERROR) return Produced::ok;  // headers now belong to the message
  rd_kafka_headers_destroy(headers);
  if (rc == RD_KAFKA_RESP_ERR__QUEUE_FULL) return Produced::queue_full;
  error = rc;
  return Produced::failed;
}

rd_kafka_topic_t* Producer::topic(const std::string& name) {
  const auto found = topics_.find(name);
  if (found != topics_.end()) return found->second;
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk_, name.c_str(), nullptr);
  if (rkt != nullptr) topics_.emplace(name, rkt);
  return rkt;
}

int Producer::poll(std::chrono::milliseconds timeout) { return rd_kafka_poll(rk_, static_cast<int>(timeout.count())); }

void Producer::drain_report_fd() const {
  char buffer[256];
  while (::read(pipe_read_, buffer, sizeof buffer) > 0) {}
}

std::optional<SinkFatal> Producer::fatal() const {
  char reason[512];
  const auto err = rd_kafka_fatal_error(rk_, reason, sizeof reason);
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return std::nullopt;
  return sink_fatal(err, reason);
}

namespace {

// librdkafka's verdict on a transactional call, as the relay acts on it.
TxnResult txn_result(rd_kafka_error_t* error) {
  if (error == nullptr) return {};
  const TxnError e{.code = rd_kafka_error_code(error),
                   .fatal = rd_kafka_error_is_fatal(error) != 0,
                   .retriable = rd_kafka_error_is_retriable(error) != 0,
                   .txn_requires_abort = rd_kafka_error_txn_requires_abort(error) != 0,
                   .text = rd_kafka_error_string(error)};
  rd_kafka_error_destroy(error);
  return kafka::txn_result(e);
}

int millis(std::chrono::milliseconds timeout) { return static_cast<int>(timeout.count()); }

}  // namespace

TxnResult Producer::init_transactions(std::chrono::milliseconds timeout) {
  return txn_result(rd_kafka_init_transactions(rk_, millis(timeout)));
}
TxnResult Producer::begin_transaction() { return txn_result(rd_kafka_begin_transaction(rk_)); }
TxnResult Producer::commit_transaction(std::chrono::milliseconds timeout) {
  return txn_result(rd_kafka_commit_transaction(rk_, millis(timeout)));
}
TxnResult Producer::abort_transaction(std::chrono::milliseconds timeout) {
  return txn_result(rd_kafka_abort_transaction(rk_, millis(timeout)));
}

void Producer::send_now() {
  if (rd_kafka_outq_len(rk_) == 0) return;
  // librdkafka's only way to skip linger.ms: while flush() runs, its broker threads send at
  // once. They must wake up before it returns (on a busy machine that can take a few ms), so
  // it gets a few milliseconds rather than none; it returns as soon as everything is
  // acknowledged, well within them on a near broker.
  constexpr int kBudgetMs = 5;
  rd_kafka_flush(rk_, kBudgetMs);
}

bool Producer::flush(std::chrono::milliseconds timeout) {
  return rd_kafka_flush(rk_, static_cast<int>(timeout.count())) == RD_KAFKA_RESP_ERR_NO_ERROR;
}

std::uint64_t Producer::queued() const { return static_cast<std::uint64_t>(rd_kafka_outq_len(rk_)); }

void Producer::on_delivery(rd_kafka_t*, const rd_kafka_message_t* msg, void* opaque) {
  auto* self = static_cast<Producer*>(opaque);
  if (!self->on_report_) return;
  DeliveryReport report;
  report.cookie = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(msg->_private));
  report.error = msg->err;
  if (msg->err != RD_KAFKA_RESP_ERR_NO_ERROR) report.error_text = rd_kafka_err2str(msg->err);
  report.topic = rd_kafka_topic_name(msg->rkt);
  report.partition = msg->partition;
  report.offset = msg->offset;
  report.weight = msg->len + msg->key_len;
  if (!report.ok() || self->report_records_) {
    outbox::Record record;
    record.topic = report.topic;
    if (msg->key != nullptr) record.key.emplace(static_cast<const char*>(msg->key), msg->key_len);
    if (msg->payload != nullptr) {
      record.value.assign(static_cast<const char*>(msg->payload), msg->len);
    } else {
      record.tombstone = true;
    }
    rd_kafka_headers_t* headers = nullptr;
    if (rd_kafka_message_headers(msg, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      const char* name = nullptr;
      const void* value = nullptr;
      std::size_t size = 0;
      for (std::size_t i = 0; rd_kafka_header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
           ++i) {
        std::string text = value != nullptr ? std::string(static_cast<const char*>(value), size) : std::string();
        // Names come back as C strings, cut at a NUL: the mapping drops such names, and the
        // event id is pgoutbox's own `id`, the first one (outbox/header_guard.h).
        if (record.event_id.empty() && std::string_view(name) == "id") record.event_id = text;
        record.headers.push_back({name, std::move(text)});
      }
    }
    // rd_kafka_message_timestamp() answers -1 for a failed message, yet the timestamp given to
    // produce() is still in it: read it with the error cleared for the call, so a record sent
    // again keeps its mapped timestamp (without it, a record refused with INVALID_TIMESTAMP was
    // taken the second time, timestamp-less). The report is ours alone during this callback.
    auto* mutable_msg = const_cast<rd_kafka_message_t*>(msg);
    const auto err = mutable_msg->err;
    mutable_msg->err = RD_KAFKA_RESP_ERR_NO_ERROR;
    record.timestamp_ms = rd_kafka_message_timestamp(mutable_msg, nullptr);
    mutable_msg->err = err;
    report.record = std::move(record);
  }
  self->on_report_(report);
}

void Producer::on_log(const rd_kafka_t*, int level, const char* facility, const char* message) {
  // A broker connection failure (facility FAIL) also reaches on_error, which logs it at warn:
  // librdkafka reconnects by itself, so it is not an error, and once is enough.
  if (std::string_view(facility) == "FAIL") return;
  // syslog levels: 0–3 error, 4 warning, 5–6 info, 7 debug.
  const auto spd = level <= 3   ? spdlog::level::err
                   : level == 4 ? spdlog::level::warn
                   : level <= 6 ? spdlog::level::info
                                : spdlog::level::debug;
  spdlog::log(spd, "librdkafka {}: {}", facility, redact_secrets(message));
}

int Producer::on_stats(rd_kafka_t*, char* json, size_t json_len, void* opaque) {
  auto* self = static_cast<Producer*>(opaque);
  const std::string_view text(json, json_len);
  if (self->on_statistics_) self->on_statistics_(text);
  // A broker in state UP means Kafka is reachable again after "all brokers down".
  if (self->on_brokers_up_ && text.find("\"state\":\"UP\"") != std::string_view::npos) self->on_brokers_up_(true);
  return 0;  // librdkafka frees the JSON
}

void Producer::on_error(rd_kafka_t* rk, int err, const char* reason, void* opaque) {
  const auto code = static_cast<rd_kafka_resp_err_t>(err);
  const std::string text = redact_secrets(reason);
  if (code == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN) {
    auto* self = static_cast<Producer*>(opaque);
    if (self->on_brokers_up_) self->on_brokers_up_(false);
    spdlog::warn("kafka: all brokers are down ({}); records stay queued and are retried", text);
    return;
  }
  if (code == RD_KAFKA_RESP_ERR__FATAL) {
    char fatal[512];
    rd_kafka_fatal_error(rk, fatal, sizeof fatal);
    spdlog::error("kafka: fatal producer error: {}", redact_secrets(fatal));
    return;
  }
  if (code == RD_KAFKA_RESP_ERR__AUTHENTICATION) {
    // librdkafka keeps reconnecting (a credential may be created or corrected meanwhile); every
    // record stays queued, and the slot is not confirmed past them.
    spdlog::error("kafka: {}: {}. Fix: {}", rd_kafka_err2name(code), text,
                  static_cast<Producer*>(opaque)->authentication_fix_);
    return;
  }
  spdlog::warn("kafka: {}: {}", rd_kafka_err2name(code), text);
}

}  // namespace pgoutbox::kafka
