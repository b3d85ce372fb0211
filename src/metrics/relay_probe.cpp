#include "pgoutbox/metrics/relay_probe.h"

#include <algorithm>
#include <set>
#include <vector>

#include "pgoutbox/metrics/kafka_statistics.h"

namespace pgoutbox::metrics {
namespace {

prometheus::Family<prometheus::Counter>& counter_family(prometheus::Registry& r, const std::string& name,
                                                        const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r);
}
prometheus::Gauge& gauge(prometheus::Registry& r, const std::string& name, const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}

}  // namespace

TopicLabels TopicLabels::from(const config::Config& config) {
  TopicLabels labels;
  labels.max_topics = config.metrics_topic_labels;
  for (const auto& t : config.tables) {
    try {
      labels.tables.push_back({t.schema + "." + t.name, config::parse_topic_template(t.topic)});
    } catch (const std::invalid_argument&) {
      // Validated at load; a template that does not parse matches no topic.
    }
  }
  for (const auto& m : config.messages) {
    try {
      // outbox::MessageMapping::label, without depending on the outbox module.
      labels.tables.push_back({"message:" + m.prefix, config::parse_topic_template(m.topic)});
    } catch (const std::invalid_argument&) {}
  }
  return labels;
}

const prometheus::Histogram::BucketBoundaries& RelayProbe::latency_buckets() {
  static const prometheus::Histogram::BucketBoundaries buckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                                  0.5,   1,      2.5,   5,    10,    30,   60};
  return buckets;
}

const prometheus::Histogram::BucketBoundaries& RelayProbe::stage_buckets() {
  static const prometheus::Histogram::BucketBoundaries buckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  return buckets;
}

RelayProbe::Stages RelayProbe::stages_in(prometheus::Registry& r) {
  auto& family =
      prometheus::BuildHistogram()
          .Name("pgoutbox_stage_seconds")
          .Help(
              "Where a transaction's time goes, per stage (docs/operating.md, Stage latency): walsender = its commit "
              "in Postgres to the walsender writing its Begin (the server's clock), receive = to that Begin reaching "
              "pgoutbox (the server's clock against pgoutbox's), send = to its last record handed to the producer, "
              "ack = to Kafka's acknowledgement of it (exactly-once: the Kafka commit), confirm = to its end being "
              "confirmable to Postgres.")
          .Register(r);
  return {family.Add({{"stage", "walsender"}}, stage_buckets()), family.Add({{"stage", "receive"}}, stage_buckets()),
          family.Add({{"stage", "send"}}, stage_buckets()), family.Add({{"stage", "ack"}}, stage_buckets()),
          family.Add({{"stage", "confirm"}}, stage_buckets())};
}

RelayProbe::RelayProbe(prometheus::Registry& r, TopicLabels labels)
    : received_(counter_family(r, "pgoutbox_events_received_total",
                               "Outbox rows decoded from the replication stream and handed to the producer.")),
      published_(counter_family(r, "pgoutbox_events_published_total", "Records Kafka acknowledged.")),
      failed_(counter_family(r, "pgoutbox_events_failed_total",
                             "Deliveries that failed for good (Kafka rejected the record or it failed validation); "
                             "each is then retried, dead-lettered, skipped or stops pgoutbox.")),
      retried_(counter_family(r, "pgoutbox_events_retried_total",
                              "Retries of records that failed for good, after a backoff.")),
      dead_lettered_(counter_family(r, "pgoutbox_events_dead_lettered_total",
                                    "Records over the retry limit written to the dead-letter topic.")),
      skipped_(counter_family(r, "pgoutbox_events_skipped_total",
                              "Records over the retry limit dropped under poison.policy skip.")),
      refused_before_sending_(counter_family(
          r, "pgoutbox_events_refused_before_sending_total",
          "Records the topic's limits say Kafka would refuse, handed to poison.policy without being sent: "
          "reason too_large (over max.message.bytes in a batch of its own, compressed) or null_key_compacted "
          "(no key, compacted topic).")),
      sessions_(prometheus::BuildCounter()
                    .Name("pgoutbox_sessions_started_total")
                    .Help("Replication sessions that reached streaming (the first, then one per reconnect).")
                    .Register(r)
                    .Add({})),
      checkpoints_refused_(prometheus::BuildCounter()
                               .Name("pgoutbox_checkpoints_refused_total")
                               .Help("Records under this slot's key in the checkpoint topic that were not trusted "
                                     "(not signed by this instance's key, or naming another slot); counted when a "
                                     "session starts.")
                               .Register(r)
                               .Add({})),
      checkpoint_topic_lost_(prometheus::BuildCounter()
                                 .Name("pgoutbox_checkpoint_topic_lost_total")
                                 .Help("Sessions that found the checkpoint topic missing (and created it) though "
                                       "the replication slot existed before this start: the slot's checkpoints "
                                       "are lost (exactly-once refuses to start, exit 25).")
                                 .Register(r)
                                 .Add({})),
      in_flight_events_gauge_(
          gauge(r, "pgoutbox_in_flight_events", "Records handed to Kafka and not yet acknowledged (pending).")),
      in_flight_bytes_gauge_(gauge(r, "pgoutbox_in_flight_bytes", "Key and value bytes of the in-flight records.")),
      received_lsn_gauge_(
          gauge(r, "pgoutbox_received_lsn", "End of the last WAL change received from the slot, as a number.")),
      confirmed_lsn_gauge_(
          gauge(r, "pgoutbox_confirmed_lsn",
                "Last position confirmed to Postgres (everything before it is in Kafka), as a number.")),
      streaming_gauge_(gauge(r, "pgoutbox_streaming", "1 while a replication session is streaming.")),
      paused_gauge_(gauge(r, "pgoutbox_stream_paused",
                          "1 while reading the slot is paused because the in-flight caps are reached.")),
      kafka_up_gauge_(gauge(r, "pgoutbox_kafka_up", "1 while the session's producer has a broker connection up.")),
      commit_to_ack_(prometheus::BuildHistogram()
                         .Name("pgoutbox_commit_to_ack_seconds")
                         .Help("From the transaction's commit in Postgres to Kafka's acknowledgement of its record.")
                         .Register(r)
                         .Add({}, latency_buckets())),
      stages_(stages_in(r)),
      kafka_queue_messages_(
          gauge(r, "pgoutbox_kafka_queue_messages", "Records in librdkafka's producer queue (statistics msg_cnt).")),
      kafka_queue_bytes_(
          gauge(r, "pgoutbox_kafka_queue_bytes", "Bytes in librdkafka's producer queue (statistics msg_size).")),
      broker_rtt_avg_(prometheus::BuildGauge()
                          .Name("pgoutbox_kafka_broker_rtt_avg_seconds")
                          .Help("Average request round-trip time to the broker over the last statistics interval.")
                          .Register(r)),
      broker_rtt_p99_(prometheus::BuildGauge()
                          .Name("pgoutbox_kafka_broker_rtt_p99_seconds")
                          .Help("99th percentile request round-trip time to the broker over the last statistics "
                                "interval.")
                          .Register(r)),
      backfill_rows_(prometheus::BuildGauge()
                         .Name("pgoutbox_backfill_rows")
                         .Help("The backfill at slot creation, per table: rows read from the slot's snapshot "
                               "(state read), rows whose records Kafka acknowledged (published), and all the "
                               "matching rows, counted in the snapshot (total).")
                         .Register(r)),
      labels_(std::move(labels)) {}

void RelayProbe::backfill_progress(std::string_view table, std::uint64_t read, std::uint64_t published,
                                   std::uint64_t total) {
  std::lock_guard lock(mutex_);
  const std::string name(table);
  backfill_rows_.Add({{"table", name}, {"state", "read"}}).Set(static_cast<double>(read));
  backfill_rows_.Add({{"table", name}, {"state", "published"}}).Set(static_cast<double>(published));
  backfill_rows_.Add({{"table", name}, {"state", "total"}}).Set(static_cast<double>(total));
}

std::string RelayProbe::table_of(std::string_view topic_name) const {
  if (config::topic_name_problem(topic_name).empty()) {
    for (const auto& t : labels_.tables) {
      if (config::template_fits(t.topic, topic_name)) return t.name;
    }
  }
  return "unknown";
}

RelayProbe::TopicSeries& RelayProbe::series(const std::string& table, const std::string& topic_label) {
  // Callers hold mutex_. Every series of a topic is created together, at 0, so that rates and
  // sums over them exist from the topic's first event on.
  const auto key = std::make_pair(table, topic_label);
  if (const auto it = series_.find(key); it != series_.end()) return it->second;
  const prometheus::Labels labels{{"table", table}, {"topic", topic_label}};
  const auto with_reason = [&](const char* reason) {
    auto more = labels;
    more.emplace("reason", reason);
    return more;
  };
  return series_
      .emplace(key, TopicSeries{table, received_.Add(labels), published_.Add(labels), failed_.Add(labels),
                                retried_.Add(labels), dead_lettered_.Add(labels), skipped_.Add(labels),
                                refused_before_sending_.Add(with_reason("too_large")),
                                refused_before_sending_.Add(with_reason("null_key_compacted"))})
      .first->second;
}

RelayProbe::TopicSeries& RelayProbe::topic(std::string_view table_name, std::string_view name) {
  // Callers hold mutex_.
  if (const auto it = topics_.find(name);
      it != topics_.end() && (table_name.empty() || it->second->table == table_name)) {
    return *it->second;
  }
  const auto table = table_name.empty() ? table_of(name) : std::string(table_name);
  if (config::topic_name_problem(name).empty()) {
    // A topic two tables' templates both make has a series per table, cached for the first.
    if (const auto it = series_.find(std::make_pair(table, std::string(name))); it != series_.end()) return it->second;
    if (topics_.size() < labels_.max_topics) {
      auto& own = series(table, std::string(name));
      topics_.emplace(std::string(name), &own);
      return own;
    }
  }
  auto& other = others_[table];
  if (other == nullptr) other = &series(table, "other");
  return *other;
}

void RelayProbe::set_kafka_state(KafkaState state) {
  kafka_state_ = state;
  kafka_up_gauge_.Set(state == KafkaState::up ? 1 : 0);
}

void RelayProbe::session_started() {
  sessions_.Increment();
  streaming_ = true;
  streaming_gauge_.Set(1);
  // A new session has a new producer: Kafka is unknown until it reports.
  set_kafka_state(KafkaState::unknown);
}

void RelayProbe::session_ended() {
  streaming_ = false;
  streaming_gauge_.Set(0);
  paused_gauge_.Set(0);
  set_kafka_state(KafkaState::unknown);
}

void RelayProbe::event_received(std::string_view table, std::string_view topic_name) {
  std::lock_guard lock(mutex_);
  topic(table, topic_name).received.Increment();
  ++received_total_;
}

void RelayProbe::event_published(std::string_view topic_name, std::chrono::microseconds commit_to_ack) {
  {
    std::lock_guard lock(mutex_);
    topic({}, topic_name).published.Increment();
  }
  ++published_total_;
  commit_to_ack_.Observe(static_cast<double>(commit_to_ack.count()) / 1e6);
  // An acknowledgement is proof that a broker is reachable.
  if (kafka_state_.load() != KafkaState::up) set_kafka_state(KafkaState::up);
}

void RelayProbe::transaction_stages(const relay::StageTimes& times, std::int64_t confirmed_us) {
  // Each stage from the end of the one before; a stage the transaction skipped (no send time for
  // a dead-lettered poison row, say) counts as zero. Clocks may step: never a negative duration.
  const auto observe = [](prometheus::Histogram& histogram, std::int64_t from, std::int64_t to) {
    histogram.Observe(static_cast<double>(std::max<std::int64_t>(0, to - from)) / 1e6);
  };
  const auto sent = std::max(times.sent_us, times.received_us);
  const auto acked = std::max(times.acked_us, sent);
  if (times.commit_us > 0 && times.server_sent_us > 0) {
    observe(stages_.walsender, times.commit_us, times.server_sent_us);
    observe(stages_.receive, times.server_sent_us, times.received_us);
  } else if (times.commit_us > 0) {
    observe(stages_.receive, times.commit_us, times.received_us);
  }
  observe(stages_.send, times.received_us, sent);
  observe(stages_.ack, sent, acked);
  observe(stages_.confirm, acked, confirmed_us);
}

void RelayProbe::event_poison(std::string_view table, std::string_view topic_name, relay::PoisonAction action) {
  std::lock_guard lock(mutex_);
  auto& series = topic(table, topic_name);
  series.failed.Increment();
  switch (action) {
    case relay::PoisonAction::retried:
      series.retried.Increment();
      break;
    case relay::PoisonAction::dead_lettered:
      series.dead_lettered.Increment();
      break;
    case relay::PoisonAction::skipped:
      series.skipped.Increment();
      break;
    case relay::PoisonAction::stopped:
      break;  // counted as failed; the session ends
  }
}

void RelayProbe::event_refused_before_sending(std::string_view table, std::string_view topic_name,
                                              relay::RefusalReason reason) {
  std::lock_guard lock(mutex_);
  auto& series = topic(table, topic_name);
  switch (reason) {
    case relay::RefusalReason::too_large:
      series.refused_too_large.Increment();
      break;
    case relay::RefusalReason::null_key_compacted:
      series.refused_null_key_compacted.Increment();
      break;
  }
}

void RelayProbe::in_flight(std::uint64_t records, std::uint64_t bytes) {
  in_flight_records_ = records;
  in_flight_bytes_ = bytes;
  in_flight_events_gauge_.Set(static_cast<double>(records));
  in_flight_bytes_gauge_.Set(static_cast<double>(bytes));
}

void RelayProbe::received_lsn(Lsn lsn) { received_lsn_gauge_.Set(static_cast<double>(lsn.value)); }

void RelayProbe::confirmed_lsn(Lsn lsn) {
  confirmed_lsn_ = lsn.value;
  confirmed_lsn_gauge_.Set(static_cast<double>(lsn.value));
}

void RelayProbe::paused(bool is_paused) { paused_gauge_.Set(is_paused ? 1 : 0); }

void RelayProbe::kafka_statistics(std::string_view json) {
  const auto stats = parse_kafka_statistics(json);
  if (!stats) return;
  kafka_queue_messages_.Set(static_cast<double>(stats->queue_messages));
  kafka_queue_bytes_.Set(static_cast<double>(stats->queue_bytes));
  set_kafka_state(stats->any_broker_up() ? KafkaState::up : KafkaState::down);

  std::lock_guard lock(mutex_);
  std::set<std::string> present;
  for (const auto& broker : stats->brokers) {
    present.insert(broker.name);
    auto it = brokers_.find(broker.name);
    if (it == brokers_.end()) {
      const prometheus::Labels labels{{"broker", broker.name}};
      it =
          brokers_.emplace(broker.name, BrokerSeries{&broker_rtt_avg_.Add(labels), &broker_rtt_p99_.Add(labels)}).first;
    }
    it->second.avg->Set(broker.rtt_avg_seconds);
    it->second.p99->Set(broker.rtt_p99_seconds);
  }
  // A broker that left the cluster (or a bootstrap entry replaced by the real one) drops out.
  for (auto it = brokers_.begin(); it != brokers_.end();) {
    if (present.count(it->first) != 0) {
      ++it;
      continue;
    }
    broker_rtt_avg_.Remove(it->second.avg);
    broker_rtt_p99_.Remove(it->second.p99);
    it = brokers_.erase(it);
  }
}

void RelayProbe::checkpoints_refused(std::uint64_t records) {
  checkpoints_refused_.Increment(static_cast<double>(records));
}

void RelayProbe::checkpoint_topic_lost() { checkpoint_topic_lost_.Increment(); }

void RelayProbe::kafka_up(bool up) { set_kafka_state(up ? KafkaState::up : KafkaState::down); }

}  // namespace pgoutbox::metrics
