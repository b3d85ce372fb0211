#pragma once

// Topic limits (issue 36, docs/operating.md "Topic limits"): pgoutbox's catch-up throughput and
// CPU per event when its destination topic's max.message.bytes is far below librdkafka's
// default batch.size (1,000,000), and when a share of the transactions each hold one row over
// that limit, which pgoutbox sends to poison.policy dead-letter before it is sent, against the
// same delivery mode into a topic at the broker's default limit with no such row. Each case
// drains the same kind of backlog as the throughput table's 10 × 200 B scenario, from its own
// slot made before it, into its own topic and dead-letter topic.

#include <cstdint>
#include <vector>

#include "contenders.h"

namespace pgoutbox::bench {

struct TopicLimitsSpec {
  std::int64_t events = 300'000;  // per backlog: 10 events per transaction, 200 B payloads
  int max_message_bytes = 16384;  // the limited topic's
  double oversized_share = 0.01;  // of the transactions, each holding one oversized row
  int oversized_bytes = 24 * 1024;
  // An untimed drain with each delivery mode first: the broker's transaction coordinator and the
  // topics every relay uses exist before the first timed case.
  std::int64_t warmup_events = 10'000;
  std::vector<Contender> modes = {Contender::pgoutbox_exactly_once, Contender::pgoutbox};
  // The timed cases in the reverse order (the backlog with oversized rows first): a second run
  // with it puts every case in the other place, so what going first or last costs (a broker
  // still writing out the last backlog) is not read as the case's.
  bool reverse = false;
  // Beside a steady load (issue 38 item 4): for each mode, a latency run at latency_rate events/s
  // (1-event transactions) for latency_seconds, then the same with one row of
  // latency_oversized_bytes (over the broker's default limit, 1 MB) every oversized_every_s
  // seconds. A row Kafka would refuse must cost one dead-letter write, not a session.
  double latency_rate = 1000;
  double latency_seconds = 60;
  double oversized_every_s = 10;
  int latency_oversized_bytes = 1'100'000;
};

struct TopicLimitsRow {
  Contender contender = Contender::pgoutbox;
  int max_message_bytes = 0;  // 0: the broker's default
  double oversized_share = 0;
  std::int64_t events = 0;     // every event of the backlog, dead-lettered ones included
  std::int64_t oversized = 0;  // of them, the ones the dead-letter topic is to hold
  DrainResult result;
  int ran = 0;  // its place in the run's order of timed cases, from 1
  double events_per_second() const { return static_cast<double>(events) / result.seconds; }
  double cpu_us_per_event() const { return 1e6 * result.process.cpu_s / static_cast<double>(events); }
};

// For each mode: the reference (the broker's default limit, no oversized row), the limited topic
// with no oversized row, and the limited topic with them; every case with poison.policy
// dead-letter into a topic of its own. Throws when an event is lost, lands in the wrong one of
// its two topics, or comes twice from exactly-once.
std::vector<TopicLimitsRow> measure_topic_limits(const Bench& bench, const TopicLimitsSpec& spec);

}  // namespace pgoutbox::bench
