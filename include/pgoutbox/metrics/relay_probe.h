#pragma once

// The relay's metrics (docs/style.md §10: the probe owns its counters, the caller passes the registry
// in). It is the relay::Observer that run passes to every session, so its series live across
// reconnects. Every prometheus-cpp metric is thread-safe; the values readiness and the summary
// need are also kept as atomics, readable from any thread.

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "pgoutbox/config/config.h"
#include "pgoutbox/config/topic_template.h"
#include "pgoutbox/lsn.h"
#include "pgoutbox/relay/observer.h"

namespace pgoutbox::metrics {

// The label values the per-topic series may take. Topics come from row values, so a label per
// topic would let whoever writes rows grow /metrics without bound (SECURITY.md "Row values").
// Each series is labelled by the row's configured table (when the relay knows only the topic, as
// for an acknowledgement: the table whose template it fits, `unknown` if none does) and by the
// topic itself only for the first
// `max_topics` distinct names Kafka would accept; every other topic is counted under
// topic="other". So the series number at most (max_topics + tables + 1) per family.
struct TopicLabels {
  struct Table {
    std::string name;                      // schema.name
    std::vector<config::TopicPart> topic;  // its topic template
  };
  std::vector<Table> tables;
  std::size_t max_topics = 100;

  static TopicLabels from(const config::Config& config);
};

enum class KafkaState { unknown, up, down };

class RelayProbe final : public relay::Observer {
 public:
  explicit RelayProbe(prometheus::Registry& registry, TopicLabels labels = {});

  void session_started() override;
  void session_ended() override;
  void event_received(std::string_view table, std::string_view topic) override;
  void event_published(std::string_view topic, std::chrono::microseconds commit_to_ack) override;
  void event_poison(std::string_view table, std::string_view topic, relay::PoisonAction action) override;
  void event_refused_before_sending(std::string_view table, std::string_view topic,
                                    relay::RefusalReason reason) override;
  void in_flight(std::uint64_t records, std::uint64_t bytes) override;
  void received_lsn(Lsn lsn) override;
  void confirmed_lsn(Lsn lsn) override;
  void transaction_stages(const relay::StageTimes& times, std::int64_t confirmed_us) override;
  void paused(bool paused) override;
  void kafka_statistics(std::string_view json) override;
  void kafka_up(bool up) override;
  void checkpoints_refused(std::uint64_t records) override;
  void checkpoint_topic_lost() override;
  void backfill_progress(std::string_view table, std::uint64_t read, std::uint64_t published,
                         std::uint64_t total) override;

  // Readable from any thread.
  bool streaming() const { return streaming_.load(); }
  KafkaState kafka_state() const { return kafka_state_.load(); }
  std::uint64_t received_total() const { return received_total_.load(); }
  std::uint64_t published_total() const { return published_total_.load(); }
  std::uint64_t in_flight_records() const { return in_flight_records_.load(); }
  std::uint64_t in_flight_bytes() const { return in_flight_bytes_.load(); }
  Lsn confirmed() const { return Lsn{confirmed_lsn_.load()}; }

  // Commit-to-ack histogram bounds in seconds: 1 ms to 60 s.
  static const prometheus::Histogram::BucketBoundaries& latency_buckets();
  // Stage histogram bounds in seconds: 100 µs to 60 s.
  static const prometheus::Histogram::BucketBoundaries& stage_buckets();

 private:
  struct TopicSeries {
    std::string table;
    prometheus::Counter& received;
    prometheus::Counter& published;
    prometheus::Counter& failed;
    prometheus::Counter& retried;
    prometheus::Counter& dead_lettered;
    prometheus::Counter& skipped;
    prometheus::Counter& refused_too_large;
    prometheus::Counter& refused_null_key_compacted;
  };
  struct TransparentHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  TopicSeries& topic(std::string_view table, std::string_view name);
  TopicSeries& series(const std::string& table, const std::string& topic);
  std::string table_of(std::string_view topic) const;
  void set_kafka_state(KafkaState state);

  prometheus::Family<prometheus::Counter>& received_;
  prometheus::Family<prometheus::Counter>& published_;
  prometheus::Family<prometheus::Counter>& failed_;
  prometheus::Family<prometheus::Counter>& retried_;
  prometheus::Family<prometheus::Counter>& dead_lettered_;
  prometheus::Family<prometheus::Counter>& skipped_;
  prometheus::Family<prometheus::Counter>& refused_before_sending_;
  prometheus::Counter& sessions_;
  prometheus::Counter& checkpoints_refused_;
  prometheus::Counter& checkpoint_topic_lost_;
  prometheus::Gauge& in_flight_events_gauge_;
  prometheus::Gauge& in_flight_bytes_gauge_;
  prometheus::Gauge& received_lsn_gauge_;
  prometheus::Gauge& confirmed_lsn_gauge_;
  prometheus::Gauge& streaming_gauge_;
  prometheus::Gauge& paused_gauge_;
  prometheus::Gauge& kafka_up_gauge_;
  prometheus::Histogram& commit_to_ack_;
  struct Stages {
    prometheus::Histogram& walsender;  // commit → the walsender wrote the transaction's Begin
    prometheus::Histogram& receive;    // → the relay has that Begin
    prometheus::Histogram& send;       // → its last record is handed to the producer
    prometheus::Histogram& ack;        // → Kafka acknowledged its last record
    prometheus::Histogram& confirm;    // → its end is confirmable to Postgres
  };
  static Stages stages_in(prometheus::Registry& registry);
  Stages stages_;
  prometheus::Gauge& kafka_queue_messages_;
  prometheus::Gauge& kafka_queue_bytes_;
  prometheus::Family<prometheus::Gauge>& broker_rtt_avg_;
  prometheus::Family<prometheus::Gauge>& broker_rtt_p99_;
  prometheus::Family<prometheus::Gauge>& backfill_rows_;

  TopicLabels labels_;
  std::mutex mutex_;  // guards topics_, others_, brokers_ and backfill_rows_
  // At most labels_.max_topics topics with a label of their own, and one "other" per table.
  std::unordered_map<std::string, TopicSeries*, TransparentHash, std::equal_to<>> topics_;
  std::map<std::string, TopicSeries*> others_;
  std::map<std::pair<std::string, std::string>, TopicSeries> series_;  // by (table, topic label)
  struct BrokerSeries {
    prometheus::Gauge* avg;
    prometheus::Gauge* p99;
  };
  std::map<std::string, BrokerSeries> brokers_;

  std::atomic<bool> streaming_{false};
  std::atomic<KafkaState> kafka_state_{KafkaState::unknown};
  std::atomic<std::uint64_t> received_total_{0};
  std::atomic<std::uint64_t> published_total_{0};
  std::atomic<std::uint64_t> in_flight_records_{0};
  std::atomic<std::uint64_t> in_flight_bytes_{0};
  std::atomic<std::uint64_t> confirmed_lsn_{0};
};

}  // namespace pgoutbox::metrics
