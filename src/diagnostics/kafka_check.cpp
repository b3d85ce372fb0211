// Kafka's side of `pgoutbox check`: the producer's own properties (so TLS and SASL are those
// `run` uses), one metadata request with a deadline, and for each topic known before any row
// arrives, whether it exists or the broker creates it on first use (auto.create.topics.enable,
// read with DescribeConfigs).
#include <librdkafka/rdkafka.h>

#include <charconv>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "pgoutbox/config/redact.h"
#include "pgoutbox/config/topic_template.h"
#include "pgoutbox/diagnostics/preflight.h"
#include "pgoutbox/diagnostics/transaction_rate.h"
#include "pgoutbox/kafka/describe_configs.h"
#include "pgoutbox/kafka/producer.h"
#include "pgoutbox/kafka/topic_limits.h"

namespace pgoutbox::diagnostics {
namespace {

const char* const kSubject = "kafka";

struct ClientErrors {
  std::mutex mutex;
  std::string last;
  bool authentication = false;  // a SASL authentication failed
};

void on_error(rd_kafka_t*, int err, const char* reason, void* opaque) {
  auto* errors = static_cast<ClientErrors*>(opaque);
  std::lock_guard lock(errors->mutex);
  const bool authentication = err == RD_KAFKA_RESP_ERR__AUTHENTICATION;
  if (errors->authentication && !authentication) return;  // "all brokers down" after it says less
  errors->last = reason;
  errors->authentication = authentication;
}

void on_log(const rd_kafka_t*, int, const char*, const char*) {}  // connection noise: the finding says it once

struct ClientDeleter {
  void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
};
using Client = std::unique_ptr<rd_kafka_t, ClientDeleter>;

struct MetadataDeleter {
  void operator()(const rd_kafka_metadata_t* md) const { rd_kafka_metadata_destroy(md); }
};

// A client with the producer's effective properties; nullptr after a finding says why not.
Client make_client(const config::Config& config, ClientErrors& errors, std::vector<Finding>& findings) {
  kafka::ProducerSettings settings;
  settings.brokers = config.kafka.brokers;
  settings.properties = config.kafka.properties;
  settings.max_in_flight_records = config.limits.max_in_flight_records;
  settings.max_in_flight_bytes = config.limits.max_in_flight_bytes;
  std::map<std::string, std::string> props;
  try {
    props = kafka::effective_properties(settings);
  } catch (const std::invalid_argument& e) {
    findings.push_back(Finding::blocking(kSubject, fmt::format("{}.", e.what()), "remove it from kafka.properties."));
    return nullptr;
  }
  props.erase("statistics.interval.ms");  // nobody polls them here
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (const auto& [name, value] : props) {
    if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      const std::string shown = config::is_secret_property(name) ? std::string(config::kRedacted) : value;
      findings.push_back(Finding::blocking(kSubject, fmt::format("property {}={} is refused: {}.", name, shown, err),
                                           fmt::format("correct or remove kafka.properties.{}.", name)));
      return nullptr;
    }
  }
  // Looking a topic up by name must not create it (the broker would, for a producer's request).
  rd_kafka_conf_set(conf, "allow.auto.create.topics", "false", err, sizeof err);
  rd_kafka_conf_set_opaque(conf, &errors);
  rd_kafka_conf_set_error_cb(conf, &on_error);
  rd_kafka_conf_set_log_cb(conf, &on_log);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (rk == nullptr) {
    findings.push_back(Finding::blocking(kSubject, fmt::format("the client cannot be created: {}.", err),
                                         "correct kafka.properties."));
    return nullptr;
  }
  return Client(rk);
}

// One configuration value of a broker or a topic; nullopt when it cannot be read (e.g. no
// DescribeConfigs ACL).
std::optional<std::string> described_config(rd_kafka_t* rk, rd_kafka_ResourceType_t type, const std::string& name,
                                            const std::string& key, std::chrono::milliseconds timeout) {
  const auto described = kafka::describe_config(rk, type, name, timeout);
  const auto it = described.entries.find(key);
  if (!described.ok() || it == described.entries.end()) return std::nullopt;
  return it->second;
}

// The broker's auto.create.topics.enable; nullopt when it cannot be read.
std::optional<bool> broker_auto_creates(rd_kafka_t* rk, std::int32_t broker_id, std::chrono::milliseconds timeout) {
  const auto value =
      described_config(rk, RD_KAFKA_RESOURCE_BROKER, std::to_string(broker_id), "auto.create.topics.enable", timeout);
  if (!value) return std::nullopt;
  return *value == "true";
}

// Exactly-once: the coordinator aborts a Kafka transaction open longer than the producer's
// transaction.timeout.ms, and refuses a producer asking for more than its own
// transaction.max.timeout.ms (docs/operating.md "Transaction timeout").
// `broker_max` is set when the broker's maximum could be read.
Finding check_transaction_timeout(rd_kafka_t* rk, std::int32_t broker_id, std::chrono::milliseconds timeout,
                                  const config::Config& config, std::optional<std::chrono::milliseconds>& broker_max) {
  constexpr const char* subject = "kafka transactions";
  const auto producer = kafka::transaction_timeout(config.kafka.properties);
  const auto value =
      described_config(rk, RD_KAFKA_RESOURCE_BROKER, std::to_string(broker_id), "transaction.max.timeout.ms", timeout);
  std::int64_t maximum = 0;
  if (!value || std::from_chars(value->data(), value->data() + value->size(), maximum).ec != std::errc()) {
    return Finding::warning(subject,
                            fmt::format("the broker's transaction.max.timeout.ms could not be read; the producer's "
                                        "transaction.timeout.ms is {} ms.",
                                        producer.count()),
                            "grant pgoutbox's principal DESCRIBE_CONFIGS on the cluster so check can compare them.");
  }
  broker_max = std::chrono::milliseconds(maximum);
  if (producer.count() > maximum) {
    return Finding::blocking(
        subject,
        fmt::format("the producer's transaction.timeout.ms ({} ms) is above the broker's transaction.max.timeout.ms "
                    "({} ms): the coordinator refuses to initialise its transactions.",
                    producer.count(), maximum),
        fmt::format("set kafka.properties.transaction.timeout.ms to at most {}, or raise the brokers' "
                    "transaction.max.timeout.ms.",
                    maximum));
  }
  return Finding::ok(subject, fmt::format("a Postgres transaction must be published within transaction.timeout.ms "
                                          "({} ms; the broker allows up to {} ms): a larger one is aborted by the "
                                          "coordinator in every session, and the log names it",
                                          producer.count(), maximum));
}

// The error the broker gives for `topic` asked by name. A listing of all topics leaves out those
// the principal may not describe; only a request naming one answers TOPIC_AUTHORIZATION_FAILED.
rd_kafka_resp_err_t named_topic_error(rd_kafka_t* rk, const std::string& topic, std::chrono::milliseconds timeout) {
  std::unique_ptr<rd_kafka_topic_t, decltype(&rd_kafka_topic_destroy)> handle(
      rd_kafka_topic_new(rk, topic.c_str(), nullptr), &rd_kafka_topic_destroy);
  if (!handle) return RD_KAFKA_RESP_ERR_NO_ERROR;
  const rd_kafka_metadata_t* raw = nullptr;
  if (rd_kafka_metadata(rk, 0, handle.get(), &raw, static_cast<int>(timeout.count())) != RD_KAFKA_RESP_ERR_NO_ERROR ||
      raw == nullptr) {
    return RD_KAFKA_RESP_ERR_NO_ERROR;
  }
  const std::unique_ptr<const rd_kafka_metadata_t, MetadataDeleter> md(raw);
  return md->topic_cnt == 1 ? md->topics[0].err : RD_KAFKA_RESP_ERR_NO_ERROR;
}

// The topic's max.message.bytes against the producer's batch.size (docs/operating.md "Topic
// limits"): what pgoutbox does about a limit below it, said before any batch is refused.
void check_topic_limit(rd_kafka_t* rk, std::chrono::milliseconds timeout, const config::Config& config,
                       const std::string& subject, const std::string& topic, std::vector<Finding>& findings) {
  const auto value = described_config(rk, RD_KAFKA_RESOURCE_TOPIC, topic, "max.message.bytes", timeout);
  std::size_t limit = 0;
  if (!value || std::from_chars(value->data(), value->data() + value->size(), limit).ec != std::errc()) return;
  kafka::ProducerSettings settings;
  settings.properties = config.kafka.properties;
  std::size_t batch_size = 0;
  try {
    batch_size = kafka::effective_batch_size(settings);
  } catch (const std::invalid_argument&) {
    return;  // the properties are a finding of their own
  }
  const auto under = kafka::batch_size_under(limit);
  if (under >= batch_size) return;
  const auto message = fmt::format(
      "topic {} takes batches of at most {} bytes (max.message.bytes), below the producer's batch.size ({}): "
      "pgoutbox keeps every batch of its producer under it (batch.size {}, for all topics), and a record "
      "larger than {} bytes compressed goes to poison.policy before it is sent",
      topic, limit, batch_size, under, limit);
  if (config.poison.policy == config::PoisonPolicy::stop) {
    findings.push_back(Finding::warning(
        subject, message + "; with poison.policy: stop, such a record stops pgoutbox",
        fmt::format("set poison.policy: dead-letter, or raise the topic's limit: kafka-configs.sh --alter "
                    "--entity-type topics --entity-name {} --add-config max.message.bytes=1048588",
                    topic)));
    return;
  }
  findings.push_back(Finding::ok(subject, message));
}

void check_topic(rd_kafka_t* rk, std::chrono::milliseconds timeout, const config::Config& config,
                 const std::string& subject, const std::string& topic, const rd_kafka_metadata_t& md,
                 std::optional<bool> auto_create, std::vector<Finding>& findings) {
  for (int i = 0; i < md.topic_cnt; ++i) {
    const auto& t = md.topics[i];
    if (topic != t.topic) continue;
    if (t.err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      findings.push_back(Finding::ok(subject, fmt::format("topic {} exists ({} partitions)", topic, t.partition_cnt)));
      check_topic_limit(rk, timeout, config, subject, topic, findings);
      return;
    }
    if (t.err != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
      findings.push_back(Finding::blocking(subject, fmt::format("topic {}: {}.", topic, rd_kafka_err2str(t.err)),
                                           "grant the producer Describe and Write on the topic (ACLs)."));
      return;
    }
  }
  if (named_topic_error(rk, topic, timeout) == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED) {
    findings.push_back(Finding::blocking(
        subject,
        fmt::format("topic {}: {}; this principal may not describe it.", topic,
                    rd_kafka_err2str(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED)),
        fmt::format("grant pgoutbox's principal WRITE and DESCRIBE on topic {} (and IDEMPOTENT_WRITE on the cluster), "
                    "e.g. kafka-acls.sh --add --allow-principal User:<name> --operation Write --operation Describe "
                    "--topic {}.",
                    topic, topic)));
    return;
  }
  if (auto_create == true) {
    findings.push_back(Finding::ok(subject, fmt::format("topic {} does not exist; the broker creates it on first use "
                                                        "(auto.create.topics.enable=true) with its default partitions",
                                                        topic)));
  } else if (auto_create == false) {
    findings.push_back(Finding::blocking(
        subject, fmt::format("topic {} does not exist and the broker does not create topics.", topic),
        fmt::format("create it: kafka-topics.sh --create --topic {} --partitions N --replication-factor 3", topic)));
  } else {
    findings.push_back(Finding::warning(
        subject, fmt::format("topic {} does not exist, and whether the broker creates it could not be read.", topic),
        fmt::format("create it (kafka-topics.sh --create --topic {}), or make sure auto.create.topics.enable is true.",
                    topic)));
  }
}

// Whether a checkpoint proves itself (docs/spec.md I11): signed, only pgoutbox's own makes it skip.
Finding checkpoint_protection(const config::Config& config) {
  const std::string subject = "checkpoint.signing_key";
  if (!config.checkpoint.signing_key.empty()) {
    return Finding::ok(subject,
                       "checkpoints are signed (HMAC-SHA256): only one written with this key makes pgoutbox skip, so "
                       "a record anybody else writes to the checkpoint topic costs at most duplicates");
  }
  return Finding::warning(
      subject,
      "checkpoints are not signed: they are written but never trusted to skip, so a Postgres crash republishes "
      "everything since the slot's last persisted position (minutes of events) instead of about checkpoint.interval",
      "openssl rand -hex 32 > /etc/pgoutbox/checkpoint.key && chmod 600 /etc/pgoutbox/checkpoint.key, then set "
      "checkpoint.signing_key_file (or PGOUTBOX_CHECKPOINT_SIGNING_KEY), the same for every instance of this slot");
}

// The checkpoint topic (docs/spec.md I10): compacted, created by pgoutbox when missing. True when
// it exists.
bool check_checkpoint_topic(rd_kafka_t* rk, std::chrono::milliseconds timeout, const config::Config& config,
                            const rd_kafka_metadata_t& md, std::vector<Finding>& findings) {
  const std::string subject = "checkpoint.topic";
  const auto& topic = config.checkpoint.topic;
  const bool required = config.delivery == config::Delivery::exactly_once;
  bool exists = false;
  int partitions = 0;
  for (int i = 0; i < md.topic_cnt; ++i) {
    if (topic != md.topics[i].topic || md.topics[i].err != 0) continue;
    exists = true;
    partitions = md.topics[i].partition_cnt;
  }
  if (!exists) {
    if (named_topic_error(rk, topic, timeout) == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED) {
      const auto fix = fmt::format(
          "grant pgoutbox's principal DESCRIBE, READ and WRITE on topic {} (and CREATE, or create it: kafka-topics.sh "
          "--create --topic {} --partitions 1 --config cleanup.policy=compact).",
          topic, topic);
      const auto message =
          fmt::format("topic {}: this principal may not describe it; {}", topic,
                      required ? "exactly-once cannot start without it"
                               : "the checkpoint is skipped, and a Postgres crash publishes more again");
      findings.push_back(required ? Finding::blocking(subject, message, fix) : Finding::warning(subject, message, fix));
      return false;
    }
    findings.push_back(Finding::ok(
        subject, fmt::format("topic {} does not exist; pgoutbox creates it at start with cleanup.policy=compact "
                             "(this needs CREATE on it)",
                             topic)));
    return false;
  }
  // As `run` finds at every start (kafka/checkpoint.h CheckpointScan::unfit): exactly-once refuses
  // such a topic, at-least-once warns.
  const auto unfit = [&](const std::string& message, const std::string& fix) {
    findings.push_back(required ? Finding::blocking(subject, message, fix) : Finding::warning(subject, message, fix));
  };
  const auto policy = described_config(rk, RD_KAFKA_RESOURCE_TOPIC, topic, "cleanup.policy", timeout);
  if (policy && policy->find("compact") == std::string::npos) {
    unfit(fmt::format("topic {} has cleanup.policy={}: Kafka may delete the newest checkpoint", topic, *policy),
          fmt::format("kafka-configs.sh --alter --entity-type topics --entity-name {} --add-config "
                      "cleanup.policy=compact",
                      topic));
    return true;
  }
  if (partitions > 1) {
    unfit(
        fmt::format("topic {} has {} partitions: a slot's checkpoints in two of them have no order", topic, partitions),
        "create a topic with one partition (kafka-topics.sh --create --topic <name> --partitions 1 --config "
        "cleanup.policy=compact) and set checkpoint.topic to it");
    return true;
  }
  findings.push_back(Finding::ok(subject, fmt::format("topic {} exists{}", topic, policy ? " (compacted)" : "")));
  return true;
}

}  // namespace

std::vector<Finding> check_kafka(const config::Config& config, std::chrono::milliseconds timeout) {
  std::vector<Finding> findings;
  ClientErrors errors;
  const Client client = make_client(config, errors, findings);
  if (!client) return findings;

  const rd_kafka_metadata_t* raw = nullptr;
  const auto err = rd_kafka_metadata(client.get(), 1, nullptr, &raw, static_cast<int>(timeout.count()));
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR || raw == nullptr) {
    // librdkafka queues its error events (the TLS or SASL reason) for rd_kafka_poll to serve.
    rd_kafka_poll(client.get(), 0);
    std::string last;
    bool authentication = false;
    {
      std::lock_guard lock(errors.mutex);
      last = errors.last;
      authentication = errors.authentication;
    }
    findings.push_back(Finding::blocking(
        kSubject,
        fmt::format("no broker at {} answered a metadata request within {} ms: {}{}.", config.kafka.brokers,
                    timeout.count(), rd_kafka_err2str(err), last.empty() ? "" : " (" + last + ")"),
        authentication ? kafka::authentication_fix(config.kafka.properties) + "."
                       : "check kafka.brokers, that the brokers run and are reachable from here, and the security "
                         "properties (security.protocol, sasl.*, ssl.*)."));
    return findings;
  }
  const std::unique_ptr<const rd_kafka_metadata_t, MetadataDeleter> md(raw);
  findings.push_back(Finding::ok(kSubject, fmt::format("{} answered: {} broker{}, {} topics", config.kafka.brokers,
                                                       md->broker_cnt, md->broker_cnt == 1 ? "" : "s", md->topic_cnt)));
  const std::optional<bool> auto_create =
      md->broker_cnt > 0 ? broker_auto_creates(client.get(), md->brokers[0].id, timeout) : std::nullopt;

  std::set<std::string> seen;
  for (const auto& table : config.tables) {
    const std::string subject = "table " + table.schema + "." + table.name;
    if (const auto topic = config::static_topic(table.topic)) {
      if (seen.insert(*topic).second)
        check_topic(client.get(), timeout, config, subject, *topic, *md, auto_create, findings);
      continue;
    }
    if (auto_create == false) {
      findings.push_back(Finding::warning(
          subject,
          fmt::format("topics come from row values ({}) and the broker does not create topics: a row naming a missing "
                      "topic is a poison record.",
                      table.topic),
          "create every topic the template can produce before rows name it, or enable auto.create.topics.enable."));
    } else {
      findings.push_back(Finding::ok(
          subject,
          fmt::format("topics come from row values ({}); the broker {}", table.topic,
                      auto_create ? "creates missing ones on first use" : "may or may not create missing ones")));
    }
  }
  if (config.poison.policy == config::PoisonPolicy::dead_letter &&
      seen.insert(config.poison.dead_letter_topic).second) {
    check_topic(client.get(), timeout, config, "poison.dead_letter_topic", config.poison.dead_letter_topic, *md,
                auto_create, findings);
  }
  bool checkpoint_topic_exists = false;
  if (config.checkpoint.enabled) {
    checkpoint_topic_exists = check_checkpoint_topic(client.get(), timeout, config, *md, findings);
    findings.push_back(checkpoint_protection(config));
  }
  if (config.delivery == config::Delivery::exactly_once && md->broker_cnt > 0) {
    std::optional<std::chrono::milliseconds> broker_max;
    findings.push_back(check_transaction_timeout(client.get(), md->brokers[0].id, timeout, config, broker_max));
    // Above the broker's maximum, no transaction initialises: there is no rate to measure.
    if (findings.back().severity != Severity::blocking) {
      const auto rate = check_transaction_rate(config, timeout, checkpoint_topic_exists, broker_max);
      findings.insert(findings.end(), rate.begin(), rate.end());
    }
  }
  return findings;
}

}  // namespace pgoutbox::diagnostics
