// `check`'s measurement of the rate at which this Kafka cluster takes pgoutbox's records inside a
// Kafka transaction (include/pgoutbox/diagnostics/transaction_rate.h), and what it says of it.
#include "pgoutbox/diagnostics/transaction_rate.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "checks.h"
#include "pgoutbox/config/transactional_id.h"
#include "pgoutbox/kafka/producer.h"
#include "pgoutbox/kafka/record_size.h"
#include "pgoutbox/kafka/topic_limits.h"

namespace pgoutbox::diagnostics {
namespace {

using namespace std::chrono_literals;

const char* const kSubject = "kafka transaction rate";

// A few thousand records, a few MiB: enough for the batches, compression and acknowledgements of
// a real transaction to show, little enough for a few seconds on a slow cluster.
constexpr std::uint64_t kMaxRecords = 5'000;
constexpr std::uint64_t kMinRecords = 16;
constexpr std::uint64_t kProbeBytes = 8ULL << 20;
// The measurement stops here, whatever is acknowledged by then.
constexpr auto kMeasureBudget = 5s;
// A coordinator that meets a transactional id for the first time (or creates its log) may take
// longer than a metadata request.
constexpr auto kMinInitTimeout = 10s;
// The probe's keys, never a slot's (system/database/slot, kafka/checkpoint.h).
constexpr const char* kKeyPrefix = "pgoutbox-check-probe-";

// A value of `bytes` characters no codec shrinks much: what compresses well is taken faster than
// this, so the figure errs on the safe side. Each record's is its own (a batch is compressed
// whole, and copies of one value would compress to nothing).
std::string incompressible(std::size_t bytes, std::uint64_t& state) {
  static constexpr char kAlphabet[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_";
  std::string value(bytes, ' ');
  for (auto& c : value) {
    state ^= state << 13U;
    state ^= state >> 7U;
    state ^= state << 17U;
    c = kAlphabet[state % 64];
  }
  return value;
}

// The probe's record of `weight` key + value bytes (the average the byte cap implies), no
// larger than the checkpoint topic takes in a batch of its own.
outbox::Record probe_record(const std::string& topic, std::size_t weight, std::size_t limit, std::uint64_t n,
                            std::uint64_t& state) {
  outbox::Record record;
  record.topic = topic;
  record.key = fmt::format("{}{}", kKeyPrefix, n % 100);
  record.value = incompressible(weight > record.key->size() ? weight - record.key->size() : 1, state);
  const auto bytes = kafka::batch_bytes(record, "none");
  if (bytes > limit) record.value.resize(record.value.size() - std::min(record.value.size() - 1, bytes - limit));
  return record;
}

std::string rate_text(const TransactionRate& rate) {
  return fmt::format("{:.0f} records/s, {:.1f} MiB/s: {} records of {} bytes{} acknowledged in {} ms",
                     rate.records_per_second(), rate.bytes_per_second() / (1 << 20), rate.records,
                     rate.records > 0 ? rate.bytes / rate.records : 0,
                     rate.cut_short ? fmt::format(" (of {} sent)", rate.sent) : "",
                     std::chrono::duration_cast<std::chrono::milliseconds>(rate.elapsed).count());
}

}  // namespace

double TransactionRate::records_per_second() const {
  return elapsed.count() > 0 ? static_cast<double>(records) * 1e6 / static_cast<double>(elapsed.count()) : 0;
}

double TransactionRate::bytes_per_second() const {
  return elapsed.count() > 0 ? static_cast<double>(bytes) * 1e6 / static_cast<double>(elapsed.count()) : 0;
}

std::optional<std::string> configured_transactional_id(const config::Config& config, std::string& why) {
  if (!config.kafka.transactional_id.empty()) return config.kafka.transactional_id;
  // run derives it from IDENTIFY_SYSTEM (relay/session.cpp); an ordinary connection reads the
  // same system identifier, and the database it names.
  const auto& pg = config.postgres;
  try {
    const auto conn = replication::Connection::open(pg.dsn, false, pg.application_name + "-check", pg.password,
                                                    std::chrono::seconds(5));
    const auto row = detail::first_row(
        conn, "SELECT system_identifier::text, pg_catalog.current_database() FROM pg_catalog.pg_control_system()");
    if (row.size() == 2) return config::derived_transactional_id(row[0], row[1], pg.slot);
    why = "Postgres did not name its system identifier";
  } catch (const std::exception& e) {
    why = fmt::format("the transactional id derives from Postgres's system identifier, which could not be read ({})",
                      e.what());
  }
  return std::nullopt;
}

RateMeasurement measure_transaction_rate(const config::Config& config, const std::string& transactional_id,
                                         std::chrono::milliseconds timeout) {
  RateMeasurement out;
  const auto& topic = config.checkpoint.topic;
  const auto& limits = config.limits;
  std::size_t limit = kafka::kKafkaDefaultMaxMessageBytes;
  try {
    limit = kafka::cluster_topic_limits(config.kafka.brokers, config.kafka.properties)->of(topic).max_message_bytes;
  } catch (const std::invalid_argument& e) {
    out.failure = e.what();
    return out;
  }
  const std::size_t weight =
      std::max<std::uint64_t>(1, limits.max_in_flight_bytes / std::max<std::uint64_t>(1, limits.max_in_flight_records));
  const std::uint64_t count = std::min({kMaxRecords, limits.max_in_flight_records,
                                        std::max(kMinRecords, kProbeBytes / std::max<std::size_t>(1, weight))});

  kafka::ProducerSettings settings;
  settings.brokers = config.kafka.brokers;
  settings.properties = config.kafka.properties;
  // The topic must exist before (the caller knows it does): a producer's request would otherwise
  // have the broker create it with its defaults, not compacted.
  settings.properties["allow.auto.create.topics"] = "false";
  settings.transactional_id = fmt::format("{}{}", transactional_id, config::kProbeSuffix);
  settings.max_in_flight_records = limits.max_in_flight_records;
  settings.max_in_flight_bytes = limits.max_in_flight_bytes;
  settings.batch_limit = limit;

  TransactionRate rate;
  bool measuring = true;
  std::string refusal;
  auto last_report = std::chrono::steady_clock::now();
  std::optional<kafka::Producer> producer;
  try {
    producer.emplace(settings, [&](const kafka::DeliveryReport& report) {
      if (!measuring) return;  // the abort's purge
      if (!report.ok()) {
        if (refusal.empty()) refusal = fmt::format("{}: {}", rd_kafka_err2name(report.error), report.error_text);
        return;
      }
      ++rate.records;
      rate.bytes += report.weight;
      last_report = std::chrono::steady_clock::now();
    });
  } catch (const std::exception& e) {
    out.failure = e.what();
    return out;
  }
  const auto init_deadline =
      std::chrono::steady_clock::now() + std::max<std::chrono::milliseconds>(timeout, kMinInitTimeout);
  auto init = producer->init_transactions(timeout);
  while (init.status == kafka::TxnStatus::retry && std::chrono::steady_clock::now() < init_deadline)
    init = producer->init_transactions(timeout);
  if (!init.ok()) {
    out.failure = fmt::format("initialising transactions of transactional id {} failed: {}", settings.transactional_id,
                              init.message);
    return out;
  }
  if (const auto begun = producer->begin_transaction(); !begun.ok()) {
    out.failure = fmt::format("beginning a transaction failed: {}", begun.message);
    return out;
  }

  std::uint64_t state = 88172645463325252ULL;
  const auto start = std::chrono::steady_clock::now();
  // Well within the probe's own transaction.timeout.ms, lest the coordinator abort it meanwhile.
  const auto budget =
      std::min<std::chrono::milliseconds>(kMeasureBudget, kafka::transaction_timeout(config.kafka.properties) / 2);
  const auto deadline = start + budget;
  while (rate.sent < count && refusal.empty() && std::chrono::steady_clock::now() < deadline) {
    rd_kafka_resp_err_t error = RD_KAFKA_RESP_ERR_NO_ERROR;
    const auto produced = producer->produce(probe_record(topic, weight, limit, rate.sent, state), rate.sent, error);
    if (produced == kafka::Producer::Produced::ok) {
      ++rate.sent;
      producer->poll(0ms);
    } else if (produced == kafka::Producer::Produced::queue_full) {
      producer->poll(1ms);
    } else {
      refusal = fmt::format("{}: {}", rd_kafka_err2name(error), rd_kafka_err2str(error));
    }
  }
  while (refusal.empty() && rate.records < rate.sent && std::chrono::steady_clock::now() < deadline)
    producer->poll(10ms);
  const auto stopped = std::chrono::steady_clock::now();
  measuring = false;
  rate.cut_short = refusal.empty() && rate.records < count;
  rate.elapsed =
      std::chrono::duration_cast<std::chrono::microseconds>((rate.cut_short ? stopped : last_report) - start);

  // Nothing of it may ever be read: abort it. Were the abort not to come through, the coordinator
  // aborts it at transaction.timeout.ms; it is never committed.
  if (const auto aborted = producer->abort_transaction(std::max<std::chrono::milliseconds>(timeout, 5s)); !aborted.ok())
    out.note = fmt::format("its abort was not confirmed ({}): the coordinator aborts it at transaction.timeout.ms",
                           aborted.message);
  if (!refusal.empty()) {
    out.failure = fmt::format("writing to checkpoint topic {} failed: {}", topic, refusal);
  } else if (rate.records == 0) {
    out.failure = fmt::format("no record was acknowledged within {} ms", budget.count());
  } else {
    out.rate = rate;
  }
  return out;
}

std::vector<Finding> transaction_rate_findings(const config::Config& config, const std::string& transactional_id,
                                               const RateMeasurement& measurement,
                                               std::optional<std::chrono::milliseconds> broker_max) {
  const auto timeout = kafka::transaction_timeout(config.kafka.properties);
  const auto note = measurement.note.empty() ? std::string() : "; " + measurement.note;
  if (!measurement.rate) {
    return {Finding::warning(
        kSubject,
        fmt::format("could not be measured, so check cannot say whether the largest Kafka transaction is published "
                    "within transaction.timeout.ms ({} ms): {}{}.",
                    timeout.count(), measurement.failure, note),
        fmt::format("grant pgoutbox's principal WRITE and DESCRIBE on transactional id {}{} (a prefixed ACL on {} "
                    "covers it and the -alt one) and WRITE on topic {}, then run check again.",
                    transactional_id, config::kProbeSuffix, transactional_id, config.checkpoint.topic))};
  }
  const auto& rate = *measurement.rate;
  const auto& limits = config.limits;
  const double records_per_s = rate.records_per_second();
  const double bytes_per_s = rate.bytes_per_second();
  const double timeout_s = static_cast<double>(timeout.count()) / 1000;
  // The transaction ends at whichever cap comes first; a Postgres transaction is never split.
  const double cap_s = std::min(static_cast<double>(limits.max_in_flight_records) / records_per_s,
                                static_cast<double>(limits.max_in_flight_bytes) / bytes_per_s);
  const auto cap_ms = static_cast<std::int64_t>(std::ceil(cap_s * 1000));
  const auto cap_records = std::min(limits.max_in_flight_records,
                                    limits.max_in_flight_bytes / std::max<std::uint64_t>(1, rate.bytes / rate.records));
  const auto measured = fmt::format("at the rate measured ({})", rate_text(rate));
  const auto largest = fmt::format(
      "the largest Kafka transaction the in-flight caps allow (limits.max_in_flight_records {} or "
      "limits.max_in_flight_bytes {}, whichever comes first: about {} records here) takes about {} ms",
      limits.max_in_flight_records, limits.max_in_flight_bytes, cap_records, cap_ms);
  std::vector<Finding> findings;
  if (cap_s > timeout_s / 2) {
    const auto needed = 2 * cap_ms;
    // What half the present timeout publishes at this rate.
    const auto records_ok = static_cast<std::uint64_t>(records_per_s * timeout_s / 2);
    const auto bytes_ok = static_cast<std::uint64_t>(bytes_per_s * timeout_s / 2);
    const auto lower = fmt::format("lower limits.max_in_flight_records to {} or limits.max_in_flight_bytes to {}",
                                   records_ok, bytes_ok);
    std::string fix;
    if (broker_max && needed > broker_max->count()) {
      fix = fmt::format(
          "{} (what half of transaction.timeout.ms publishes at this rate), or raise "
          "kafka.properties.transaction.timeout.ms up to the broker's transaction.max.timeout.ms ({} ms) "
          "and lower them less.",
          lower, broker_max->count());
    } else {
      fix = fmt::format(
          "raise kafka.properties.transaction.timeout.ms to {} or more ({}), or {}.", needed,
          broker_max ? fmt::format("the broker allows up to {} ms, its transaction.max.timeout.ms", broker_max->count())
                     : std::string("at most the brokers' transaction.max.timeout.ms"),
          lower);
    }
    const auto consequence =
        cap_s > timeout_s
            ? fmt::format(
                  "more than transaction.timeout.ms ({} ms): the coordinator aborts a transaction that large, "
                  "and the session starts again",
                  timeout.count())
            : fmt::format(
                  "more than half of transaction.timeout.ms ({} ms): should Kafka slow down, the coordinator "
                  "aborts it and the session starts again",
                  timeout.count());
    findings.push_back(
        Finding::warning(kSubject, fmt::format("{}, {}, {}{}.", measured, largest, consequence, note), fix));
  } else {
    findings.push_back(Finding::ok(kSubject, fmt::format("{}, {}, within half of transaction.timeout.ms ({} ms){}",
                                                         measured, largest, timeout.count(), note)));
  }
  findings.push_back(Finding::ok(
      kSubject, fmt::format("at that rate a single Postgres transaction of up to about {} records or {} bytes is "
                            "published within transaction.timeout.ms ({} ms); a larger one is aborted by the "
                            "coordinator in every session (a Postgres transaction is never split)",
                            static_cast<std::uint64_t>(records_per_s * timeout_s),
                            static_cast<std::uint64_t>(bytes_per_s * timeout_s), timeout.count())));
  return findings;
}

std::vector<Finding> check_transaction_rate(const config::Config& config, std::chrono::milliseconds timeout,
                                            bool checkpoint_topic_exists,
                                            std::optional<std::chrono::milliseconds> broker_max) {
  const auto& topic = config.checkpoint.topic;
  if (!checkpoint_topic_exists) {
    return {Finding::warning(
        kSubject,
        fmt::format("not measured: check measures it in checkpoint topic {}, which this client does not see (it does "
                    "not exist yet, or may not be described).",
                    topic),
        fmt::format("run check again once pgoutbox has created it at its first start (or create it: kafka-topics.sh "
                    "--create --topic {} --partitions 1 --config cleanup.policy=compact).",
                    topic))};
  }
  std::string why;
  const auto id = configured_transactional_id(config, why);
  if (!id) {
    return {Finding::warning(kSubject, fmt::format("not measured: {}.", why),
                             "set kafka.transactional_id, or make postgres.dsn reachable from here.")};
  }
  return transaction_rate_findings(config, *id, measure_transaction_rate(config, *id, timeout), broker_max);
}

}  // namespace pgoutbox::diagnostics
