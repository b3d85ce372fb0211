#include "pgoutbox/kafka/checkpoint.h"

#include <librdkafka/rdkafka.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <set>
#include <stdexcept>
#include <string_view>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include "pgoutbox/kafka/describe_configs.h"
#include "pgoutbox/kafka/producer.h"
#include "pgoutbox/kafka/topic_admin.h"
#include "pgoutbox/logging/logging.h"
#include "pgoutbox/secrets.h"

namespace pgoutbox::kafka {
namespace {

constexpr auto kProgressReport = std::chrono::seconds(10);
constexpr int kUnsignedVersion = 1;  // read: written before checkpoints were signed
constexpr int kUnmarkedVersion = 2;  // read: signed, without the transaction it covers

void field(std::string& out, std::string_view name, std::string_view value) {
  out += out.size() > 1 ? ",\"" : "\"";
  out += name;
  out += "\":\"";
  logging::append_json_escaped(out, value);
  out += '"';
}

struct KafkaDeleter {
  void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
};
using KafkaHandle = std::unique_ptr<rd_kafka_t, KafkaDeleter>;

struct QueueDeleter {
  void operator()(rd_kafka_queue_t* q) const { rd_kafka_queue_destroy(q); }
};
struct EventDeleter {
  void operator()(rd_kafka_event_t* e) const { rd_kafka_event_destroy(e); }
};
struct PartitionsDeleter {
  void operator()(rd_kafka_topic_partition_list_t* l) const { rd_kafka_topic_partition_list_destroy(l); }
};
struct MetadataDeleter {
  void operator()(const rd_kafka_metadata_t* m) const { rd_kafka_metadata_destroy(m); }
};

int millis(std::chrono::milliseconds d) { return static_cast<int>(d.count()); }

// What a consumer of the checkpoint topic is for.
enum class ConsumerRole {
  // Reads what is committed, by assignment: librdkafka's assign() needs a group.id, though the
  // consumer never joins that group or commits an offset.
  reader,
  // Only asks where the partitions end, read_uncommitted; no group.id, so no group coordinator
  // connection either.
  watermarks,
};

// A consumer's login as its error callback saw it: `fix` is what a refused login logs as its fix,
// `refused` the first refusal's reason (a refused authentication or TLS handshake). It outlives
// the consumer.
struct Login {
  std::string fix;
  std::string refused;
};

// A consumer that never joins a group or commits offsets.
KafkaHandle open_consumer(const CheckpointSettings& settings, Login& login, ConsumerRole role) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  std::map<std::string, std::string> props;
  // Only the connection's properties apply to a consumer (TLS, SASL, client.id...); librdkafka
  // ignores producer-only ones with a log line, which the log callback keeps at debug.
  for (const auto& [name, value] : settings.properties) props[name] = value;
  props["bootstrap.servers"] = settings.brokers;
  if (role == ConsumerRole::reader) props["group.id"] = "pgoutbox-checkpoint-reader";
  props["enable.auto.commit"] = "false";
  props["enable.auto.offset.store"] = "false";
  props["isolation.level"] = role == ConsumerRole::watermarks ? "read_uncommitted" : "read_committed";
  props["enable.partition.eof"] = "true";
  props["auto.offset.reset"] = "earliest";
  // Anyone who may write the topic may fill it with large records: what the reader holds
  // prefetched stays a few MB whatever they wrote (librdkafka's defaults: 64 MB queued, 50 MB
  // a fetch).
  props["queued.max.messages.kbytes"] = "4096";
  std::uint64_t fetch_bytes = 4 << 20;  // at least the largest record the client may take
  if (const auto it = props.find("message.max.bytes"); it != props.end())
    fetch_bytes = std::max<std::uint64_t>(fetch_bytes, std::strtoull(it->second.c_str(), nullptr, 10));
  props["fetch.max.bytes"] = std::to_string(fetch_bytes);
  // The end of a partition is known when a fetch comes back with nothing more; the broker holds
  // such a fetch this long (librdkafka's default: 500 ms, each start).
  props["fetch.wait.max.ms"] = "100";
  // These consumers live for a moment. With client metrics push on (librdkafka's default since
  // 2.5, KIP-714), destroying one waits up to a second for a final push that is never due.
  props["enable.metrics.push"] = "false";
  props["client.id"] = "pgoutbox-checkpoint";
  for (const auto& [name, value] : props) {
    if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK)
      spdlog::debug("checkpoint reader: kafka property {} not for a consumer: {}", name, err);
  }
  rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t*, int level, const char* facility, const char* message) {
    // A connection failure (FAIL) also reaches the error callback, which says it once.
    const bool connection = std::string_view(facility) == "FAIL";
    spdlog::log(level <= 3 && !connection ? spdlog::level::warn : spdlog::level::debug,
                "librdkafka (checkpoint) {}: {}", facility, message);
  });
  // The checkpoint is read before the producer's first connection, so a refused login is
  // usually seen here first: it gets the same fix as the producer's. Served by the waits below
  // (`throw_if_refused`), which stop at the first refusal.
  rd_kafka_conf_set_error_cb(conf, [](rd_kafka_t*, int error, const char* reason, void* opaque) {
    const auto code = static_cast<rd_kafka_resp_err_t>(error);
    const std::string text = redact_secrets(reason);
    auto& seen = *static_cast<Login*>(opaque);
    if (code == RD_KAFKA_RESP_ERR__AUTHENTICATION) {
      spdlog::error("kafka (checkpoint reader): {}: {}. Fix: {}", rd_kafka_err2name(code), text, seen.fix);
      if (seen.refused.empty()) seen.refused = "Kafka refused the login: " + text;
    } else if (code == RD_KAFKA_RESP_ERR__SSL) {
      // A broker certificate this host does not trust, or a handshake cut short: either way no
      // answer comes through this connection now. A transient one costs a retry in exactly-once and
      // a session that skips nothing in at-least-once.
      spdlog::warn("kafka (checkpoint reader): {}: {}", rd_kafka_err2name(code), text);
      if (seen.refused.empty()) seen.refused = "no TLS connection to Kafka: " + text;
    } else {
      spdlog::warn("kafka (checkpoint reader): {}: {}", rd_kafka_err2name(code), text);
    }
  });
  rd_kafka_conf_set_opaque(conf, &login);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    throw std::invalid_argument(fmt::format("cannot create the checkpoint reader: {}", err));
  }
  return KafkaHandle(rk);
}

// Serves the consumer's error callback; a login Kafka refused ends the wait at once, named, since
// no answer about the topic can come before the login is fixed (a refused login's metadata requests
// only fail with "broker transport failure", and the callback is not served while they block).
void throw_if_refused(rd_kafka_t* rk, const Login& login) {
  rd_kafka_poll(rk, 0);
  if (!login.refused.empty()) throw std::runtime_error(login.refused);
}

// Where each partition starts and ends: its end is past every record written, committed or not.
// Asked with read_uncommitted, as ListOffsets answers read_committed with the last stable offset.
struct Watermarks {
  std::int64_t low = 0;
  std::int64_t high = 0;
};
std::vector<Watermarks> watermarks(const CheckpointSettings& settings, int partitions, Login& login) {
  const auto probe = open_consumer(settings, login, ConsumerRole::watermarks);
  std::vector<Watermarks> marks(static_cast<std::size_t>(partitions));
  for (int p = 0; p < partitions; ++p) {
    auto& mark = marks[static_cast<std::size_t>(p)];
    const auto err = rd_kafka_query_watermark_offsets(probe.get(), settings.topic.c_str(), p, &mark.low, &mark.high,
                                                      millis(settings.timeout));
    throw_if_refused(probe.get(), login);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      throw std::runtime_error(fmt::format("cannot ask where checkpoint topic {} partition {} ends: {}", settings.topic,
                                           p, rd_kafka_err2str(err)));
    }
  }
  return marks;
}

// Creates the topic compacted, with one partition and the broker's replication factor.
TopicCreation create_checkpoint_topic(rd_kafka_t* rk, const std::string& topic, std::chrono::milliseconds timeout) {
  auto creation =
      create_topic(rk, {.name = topic, .partitions = 1, .config = {{"cleanup.policy", "compact"}}}, timeout);
  switch (creation.kind) {
    case TopicCreation::Kind::created:
      spdlog::info("created checkpoint topic {} (cleanup.policy=compact)", topic);
      break;
    case TopicCreation::Kind::exists:
      break;
    case TopicCreation::Kind::refused:
    case TopicCreation::Kind::failed:
      creation.error = fmt::format(
          "cannot create checkpoint topic {} ({}): create it with cleanup.policy=compact "
          "(kafka-topics.sh --create --topic {} --partitions 1 --config cleanup.policy=compact), or "
          "grant CREATE on it",
          topic, creation.error, topic);
  }
  return creation;
}

// The topic's partition count, once the cluster has said it exists. A topic the cluster does not
// know is created; one whose creation finds it exists (the broker was still loading its metadata,
// or another instance created it meanwhile) is asked about again. Anything but a definite answer
// is asked again until the deadline: never taken for "no checkpoint" (in exactly-once that would
// publish again what the checkpoint covers). 0: it does not exist (created now when `create`), so
// it holds none.
int partitions_of(rd_kafka_t* rk, const Login& login, const std::string& topic, std::chrono::milliseconds timeout,
                  bool create) {
  constexpr auto kAskAgain = std::chrono::milliseconds(250);
  constexpr auto kAskAtMost = std::chrono::milliseconds(2000);  // between two looks at the login
  constexpr auto kCreateAtLeast = std::chrono::milliseconds(1000);
  constexpr auto kCreateAtMost = std::chrono::milliseconds(5000);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left <= std::chrono::milliseconds::zero()) break;
    const auto answer = describe_topic(rk, topic, std::min(left, kAskAtMost));
    throw_if_refused(rk, login);
    if (answer.kind == TopicAnswer::Kind::exists) return answer.partitions;
    if (answer.kind == TopicAnswer::Kind::unknown && !create) {
      spdlog::warn("checkpoint topic {} does not exist; it is not created", topic);
      return 0;
    }
    if (answer.kind == TopicAnswer::Kind::unknown) {
      // A creation that does not answer within seconds leaves time to ask again.
      const auto creation = create_checkpoint_topic(rk, topic, std::clamp(left, kCreateAtLeast, kCreateAtMost));
      if (creation.kind == TopicCreation::Kind::created) return 0;
      // A twin of the name, a policy: asking again cannot change the broker's mind.
      if (creation.kind == TopicCreation::Kind::refused) throw std::runtime_error(creation.error);
      last = creation.kind == TopicCreation::Kind::exists
                 ? "the broker did not know the topic, and creating it found it existing"
                 : creation.error;
    } else {
      last = answer.error;
    }
    spdlog::debug("checkpoint topic {}: {}; asking again", topic, last);
    std::this_thread::sleep_for(kAskAgain);
  }
  throw std::runtime_error(fmt::format("checkpoint topic {}: no definite answer from Kafka within {} ms ({})", topic,
                                       timeout.count(), last));
}

// Why a topic that exists cannot keep a slot's checkpoint safely, or "": someone else may have
// created it before pgoutbox did. A configuration that cannot be read (no DESCRIBE_CONFIGS) is
// no verdict.
std::string unfitness(rd_kafka_t* rk, const std::string& topic, int partitions, std::chrono::milliseconds timeout) {
  std::vector<std::string> problems;
  const auto described =
      describe_config(rk, RD_KAFKA_RESOURCE_TOPIC, topic, std::min(timeout, std::chrono::milliseconds(5000)));
  if (const auto it = described.entries.find("cleanup.policy");
      described.ok() && it != described.entries.end() && it->second.find("compact") == std::string::npos) {
    problems.push_back(
        fmt::format("has cleanup.policy={}: Kafka deletes a slot's newest checkpoint retention.ms "
                    "after it was written, however quiet the slot",
                    it->second));
  }
  if (partitions > 1) {
    problems.push_back(
        fmt::format("has {} partitions: a slot's checkpoints in two of them (after partitions are "
                    "added) have no order, and the older may be taken for the newer",
                    partitions));
  }
  if (problems.empty()) return {};
  return fmt::format(
      "checkpoint topic {} {}. Fix: stop every pgoutbox that uses it, then create a new topic with "
      "kafka-topics.sh --create --topic <name> --partitions 1 --config cleanup.policy=compact, copy "
      "the records, and set checkpoint.topic to it (a topic's partitions cannot be removed; its "
      "policy can be changed: kafka-configs.sh --alter --entity-type topics --entity-name {} "
      "--add-config cleanup.policy=compact)",
      topic, fmt::join(problems, ", and "), topic);
}

}  // namespace

Checkpoint checkpoint_of(const SlotIdentity& slot, const Coverage& covered) {
  Checkpoint c;
  c.slot = slot;
  if (covered.transaction) {
    c.lsn = covered.transaction->end_lsn;
    c.xid = covered.transaction->xid;
    c.commit_time = covered.transaction->commit_time;
  }
  c.messages_end = covered.messages_end;
  return c;
}

std::string signed_text(const Checkpoint& c) {
  // Domain-separated by version, every field length-prefixed: no two checkpoints share a text,
  // and a version-2 record (which has no transaction) keeps verifying as it was signed.
  const bool marked = c.version >= kCheckpointVersion;
  std::string out = marked ? "pgoutbox checkpoint v3\n" : "pgoutbox checkpoint v2\n";
  for (const std::string_view part :
       {std::string_view(c.slot.system_id), std::string_view(c.slot.database), std::string_view(c.slot.slot),
        std::string_view(c.delivery), std::string_view(c.transactional_id)}) {
    out += fmt::format("{}:", part.size());
    out += part;
    out += '\n';
  }
  out += fmt::format("timeline:{}\nlsn:{}\n", c.timeline, c.lsn.to_string());
  if (marked) out += fmt::format("xid:{}\ncommit_time:{}\n", c.xid, c.commit_time);
  // Only when set, so that a checkpoint without it verifies as it was signed before it existed.
  if (marked && c.messages_end != Lsn{}) out += fmt::format("messages_end:{}\n", c.messages_end.to_string());
  return out;
}

CheckpointKey::CheckpointKey(std::string secret) : secret_(std::move(secret)) {
  if (secret_.size() < kMinBytes) {
    throw std::invalid_argument(
        fmt::format("is {} bytes long; a signing key needs at least {} (e.g. the output of "
                    "`openssl rand -hex 32`)",
                    secret_.size(), kMinBytes));
  }
}

std::string CheckpointKey::mac_of(const Checkpoint& c) const {
  const std::string text = signed_text(c);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
           reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest, &length) == nullptr) {
    throw std::runtime_error("HMAC-SHA256 failed");
  }
  std::string hex;
  hex.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

void CheckpointKey::sign(Checkpoint& c) const { c.mac = mac_of(c); }

bool CheckpointKey::verifies(const Checkpoint& c) const {
  const std::string expected = mac_of(c);
  return c.mac.size() == expected.size() && CRYPTO_memcmp(c.mac.data(), expected.data(), expected.size()) == 0;
}

std::string encode(const Checkpoint& c) {
  std::string out = "{";
  out += fmt::format("\"version\":{}", c.version);
  field(out, "system_id", c.slot.system_id);
  field(out, "database", c.slot.database);
  field(out, "slot", c.slot.slot);
  out += fmt::format(",\"timeline\":{}", c.timeline);
  field(out, "lsn", c.lsn.to_string());
  field(out, "delivery", c.delivery);
  field(out, "transactional_id", c.transactional_id);
  if (c.version >= kCheckpointVersion) out += fmt::format(",\"xid\":{},\"commit_time\":{}", c.xid, c.commit_time);
  if (c.version >= kCheckpointVersion && c.messages_end != Lsn{})
    field(out, "messages_end", c.messages_end.to_string());
  if (c.version >= kUnmarkedVersion) field(out, "mac", c.mac);
  out += '}';
  return out;
}

std::optional<Checkpoint> decode(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(json.data(), json.size()).get(root) != simdjson::SUCCESS) return std::nullopt;
  std::int64_t version = 0;
  if (root["version"].get(version) != simdjson::SUCCESS || version < kUnsignedVersion || version > kCheckpointVersion)
    return std::nullopt;
  Checkpoint c;
  c.version = static_cast<int>(version);
  std::string_view text;
  const auto string_field = [&](const char* name, std::string& into) {
    if (root[name].get(text) != simdjson::SUCCESS) return false;
    into = std::string(text);
    return true;
  };
  std::string lsn;
  std::int64_t timeline = 0;
  if (!string_field("system_id", c.slot.system_id) || !string_field("database", c.slot.database) ||
      !string_field("slot", c.slot.slot) || !string_field("lsn", lsn) || !string_field("delivery", c.delivery) ||
      !string_field("transactional_id", c.transactional_id) || root["timeline"].get(timeline) != simdjson::SUCCESS) {
    return std::nullopt;
  }
  if (version >= kUnmarkedVersion && !string_field("mac", c.mac)) return std::nullopt;
  if (version >= kCheckpointVersion) {
    std::uint64_t xid = 0;
    if (root["xid"].get(xid) != simdjson::SUCCESS || xid > UINT32_MAX ||
        root["commit_time"].get(c.commit_time) != simdjson::SUCCESS)
      return std::nullopt;
    c.xid = static_cast<std::uint32_t>(xid);
    std::string messages_end;
    if (root["messages_end"].error() != simdjson::NO_SUCH_FIELD) {
      if (!string_field("messages_end", messages_end)) return std::nullopt;
      const auto parsed_end = Lsn::parse(messages_end);
      if (!parsed_end || *parsed_end == Lsn{}) return std::nullopt;
      c.messages_end = *parsed_end;
    }
  }
  const auto parsed = Lsn::parse(lsn);
  if (!parsed || timeline < 0 || timeline > INT32_MAX) return std::nullopt;
  c.lsn = *parsed;
  c.timeline = static_cast<int>(timeline);
  return c;
}

void scan_record(CheckpointScan& scan, const SlotIdentity& identity, const std::string& transactional_id,
                 const CheckpointKey* key, std::string_view record_key, std::optional<std::string_view> value,
                 int partition, std::int64_t offset) {
  const bool under_mine = record_key == identity.key();
  const auto refuse = [&](std::string reason) {
    if (!under_mine) return;
    ++scan.refused_count;
    if (scan.refused.size() == CheckpointScan::kMaxRefusedKept) scan.refused.erase(scan.refused.begin());
    scan.refused.push_back({partition, offset, std::move(reason)});
  };
  if (!value) {
    // pgoutbox never writes one: a tombstone under this slot's key is someone's attempt to erase
    // its checkpoint (once compaction runs, the record it supersedes is gone). Counted and kept
    // from the scan: the checkpoint before it stays the newest (issue 38 item 1).
    refuse(
        "it is a tombstone (a null value), which pgoutbox never writes: it would erase this slot's checkpoint, "
        "and compaction deletes the checkpoint it supersedes");
    return;
  }
  // A checkpoint is a few hundred bytes: a larger record is not decoded, so a flood of large
  // records costs the reader their transfer only.
  if (value->size() > kMaxCheckpointBytes) {
    refuse(fmt::format("it is {} bytes, larger than a checkpoint can be ({})", value->size(), kMaxCheckpointBytes));
    return;
  }
  const auto checkpoint = decode(*value);
  if (!checkpoint) {
    refuse("it is not a checkpoint");
    return;
  }
  // The value must say what the key says: a record keyed for this slot that names another is
  // not this slot's, and neither is one filed under another key that names this one.
  if (checkpoint->slot.key() != record_key) {
    refuse(fmt::format("its value names {}, not the key it is filed under", checkpoint->slot.key()));
    return;
  }
  if (key != nullptr && !key->verifies(*checkpoint)) {
    refuse(checkpoint->mac.empty() ? "it is not signed"
                                   : "its signature does not verify with checkpoint.signing_key: pgoutbox with this "
                                     "key did not write it");
    return;
  }
  if (under_mine) {
    scan.mine = checkpoint;
  } else if (checkpoint->slot.database == identity.database && checkpoint->slot.slot == identity.slot) {
    scan.other_systems.push_back(*checkpoint);
  } else if (!transactional_id.empty() && checkpoint->transactional_id == transactional_id) {
    scan.same_transactional_id.push_back(*checkpoint);
  }
}

outbox::Record checkpoint_record(const std::string& topic, const Checkpoint& checkpoint) {
  outbox::Record record;
  record.topic = topic;
  record.key = checkpoint.slot.key();
  record.value = encode(checkpoint);
  record.event_id = "checkpoint";
  return record;
}

void ensure_checkpoint_topic(const CheckpointSettings& settings) {
  Login login{.fix = authentication_fix(settings.properties), .refused = {}};
  const auto consumer = open_consumer(settings, login, ConsumerRole::reader);
  partitions_of(consumer.get(), login, settings.topic, settings.timeout, true);
}

CheckpointScan read_checkpoints(const CheckpointSettings& settings, const SlotIdentity& identity,
                                const std::string& transactional_id, const CheckpointKey* key) {
  CheckpointScan scan;
  Login login{.fix = authentication_fix(settings.properties), .refused = {}};
  const auto consumer = open_consumer(settings, login, ConsumerRole::reader);
  rd_kafka_t* rk = consumer.get();
  const int partitions = partitions_of(rk, login, settings.topic, settings.timeout, settings.create_missing);
  if (partitions == 0) {
    scan.topic_missing = true;  // created now, or left missing: it holds nothing
    return scan;
  }
  scan.unfit = unfitness(rk, settings.topic, partitions, settings.timeout);
  // Where this read must get to: what was written before it began. read_committed ends at the
  // last stable offset instead, before the first record of a transaction still open there; a
  // record of this slot after it is hidden until that transaction ends (docs/spec.md I11).
  const auto marks = watermarks(settings, partitions, login);
  std::set<int> at_end;  // an empty partition is read already
  const std::unique_ptr<rd_kafka_topic_partition_list_t, PartitionsDeleter> assignment(
      rd_kafka_topic_partition_list_new(partitions));
  for (int p = 0; p < partitions; ++p) {
    const auto& mark = marks[static_cast<std::size_t>(p)];
    if (mark.low >= mark.high) {
      at_end.insert(p);
    } else {
      rd_kafka_topic_partition_list_add(assignment.get(), settings.topic.c_str(), p)->offset =
          RD_KAFKA_OFFSET_BEGINNING;
    }
  }
  if (static_cast<int>(at_end.size()) == partitions) return scan;
  if (const auto err = rd_kafka_assign(rk, assignment.get()); err != RD_KAFKA_RESP_ERR_NO_ERROR)
    throw std::runtime_error(fmt::format("cannot read checkpoint topic {}: {}", settings.topic, rd_kafka_err2str(err)));

  std::map<int, std::int64_t> held;  // partitions read to their last stable offset, short of their high watermark
  std::optional<std::chrono::steady_clock::time_point> held_since;
  // The read may take as long as the topic's volume needs, as long as it moves: it ends with an
  // error only after settings.timeout without a record, and says how far it got every 10 s.
  auto last_progress = std::chrono::steady_clock::now();
  auto next_report = last_progress + kProgressReport;
  std::uint64_t records_read = 0;
  std::uint64_t bytes_read = 0;
  while (static_cast<int>(at_end.size()) < partitions) {
    const auto now = std::chrono::steady_clock::now();
    if (now > next_report) {
      next_report = now + kProgressReport;
      spdlog::info("checkpoint topic {}: {} record(s), {} MB read so far; {} of {} partition(s) at their end",
                   settings.topic, records_read, bytes_read >> 20, at_end.size(), partitions);
    }
    const bool only_held = static_cast<int>(at_end.size() + held.size()) == partitions;
    if (only_held && now > *held_since + settings.hidden_wait) {
      const auto& [p, stable] = *held.begin();
      scan.hidden = fmt::format(
          "partition {} of checkpoint topic {} ends at offset {} for read_committed, short of {}, for {} ms: a "
          "Kafka transaction opened there is still open (an exactly-once instance killed while writing, whose "
          "transaction the coordinator aborts transaction.timeout.ms after it began), and a newer checkpoint of "
          "this slot may be behind it",
          p, settings.topic, stable, marks[static_cast<std::size_t>(p)].high, settings.hidden_wait.count());
      scan.hidden_partition = p;
      scan.hidden_offset = stable;
      break;
    }
    if (!only_held && now > last_progress + settings.timeout) {
      rd_kafka_assign(rk, nullptr);
      throw std::runtime_error(
          fmt::format("reading checkpoint topic {} to its end: no record came for {} ms ({} record(s), {} MB read)",
                      settings.topic, settings.timeout.count(), records_read, bytes_read >> 20));
    }
    throw_if_refused(rk, login);
    rd_kafka_message_t* msg = rd_kafka_consumer_poll(rk, 200);
    if (msg == nullptr) continue;
    const std::unique_ptr<rd_kafka_message_t, decltype(&rd_kafka_message_destroy)> owned(msg,
                                                                                         &rd_kafka_message_destroy);
    if (msg->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      last_progress = now;
      if (msg->offset >= marks[static_cast<std::size_t>(msg->partition)].high) {
        at_end.insert(msg->partition);
        held.erase(msg->partition);
      } else if (held.emplace(msg->partition, msg->offset).second && !held_since) {
        held_since = now;
        spdlog::warn(
            "checkpoint topic {} partition {}: read_committed ends at offset {}, short of the {} written before "
            "this read began: a Kafka transaction there is still open, and a newer checkpoint of this slot may be "
            "behind it; waiting up to {} ms for it to be committed or aborted",
            settings.topic, msg->partition, msg->offset, marks[static_cast<std::size_t>(msg->partition)].high,
            settings.hidden_wait.count());
      }
      continue;
    }
    if (msg->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (msg->err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
          msg->err == RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED) {
        rd_kafka_assign(rk, nullptr);
        throw std::runtime_error(fmt::format("not authorised to read checkpoint topic {}: {}", settings.topic,
                                             rd_kafka_message_errstr(msg)));
      }
      spdlog::debug("checkpoint reader: {}", rd_kafka_message_errstr(msg));
      continue;
    }
    held.erase(msg->partition);  // it moves again: its end is read anew
    last_progress = now;
    const std::string_view record_key(msg->key != nullptr ? static_cast<const char*>(msg->key) : "", msg->key_len);
    std::optional<std::string_view> value;
    if (msg->payload != nullptr) value = std::string_view(static_cast<const char*>(msg->payload), msg->len);
    scan_record(scan, identity, transactional_id, key, record_key, value, msg->partition, msg->offset);
    ++records_read;
    bytes_read += msg->len + msg->key_len;
    // What was written after the read began is not waited for: a writer who keeps writing
    // cannot keep the read from its end.
    if (msg->offset + 1 >= marks[static_cast<std::size_t>(msg->partition)].high) at_end.insert(msg->partition);
  }
  rd_kafka_assign(rk, nullptr);
  if (!scan.hidden.empty() || held_since) {
    spdlog::log(scan.hidden.empty() ? spdlog::level::info : spdlog::level::warn, "checkpoint topic {}: {}",
                settings.topic, scan.hidden.empty() ? "the open transaction ended; read to the end" : scan.hidden);
  }
  return scan;
}

std::chrono::milliseconds hidden_end_wait(const std::map<std::string, std::string>& properties, bool exactly_once) {
  using namespace std::chrono_literals;
  if (!exactly_once) return 10s;
  return transaction_timeout(properties) + 15s;
}

}  // namespace pgoutbox::kafka
