// The relay without services: pgoutput messages built from the wire layouts (the decoder tests'
// MessageBuilder) go in through a fake change source, records come out in a fake Kafka sink
// whose verdicts each case scripts. Every case runs in milliseconds.

#include <gtest/gtest.h>

#include "relay_fakes.h"

namespace pgoutbox::relay {
namespace {

using namespace pgoutbox::relay::testing;
using namespace std::chrono_literals;

TEST(RelayUnit, PublishesEveryRowAndConfirmsTheCommitEnd) {
  Harness h;
  h.source.push(relation());
  h.txn(0x1000, 3);
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  ASSERT_EQ(h.script.produced.size(), 3U);
  EXPECT_EQ(h.script.produced[0].record.topic, "outbox.event.E");
  EXPECT_EQ(h.counters.records_acked, 3U);
  EXPECT_EQ(h.source.flush, Lsn{0x1000});
  EXPECT_FALSE(h.timed_out);
}

// Batching follows the load: once the stream is caught up, what is queued goes at once instead
// of waiting out linger.ms, unless turned off; in exactly-once, whenever a commit starts (it
// waits for the transaction's reports), whatever the setting.
TEST(RelayUnit, SendsAtOnceWhenTheStreamIsCaughtUp) {
  struct Case {
    bool send_when_caught_up;
    config::Delivery delivery;
    int expected;
  };
  for (const auto& c :
       {Case{true, config::Delivery::at_least_once, 1}, Case{false, config::Delivery::at_least_once, 0},
        Case{true, config::Delivery::exactly_once, 1}, Case{false, config::Delivery::exactly_once, 1}}) {
    auto cfg = test_config();
    cfg.kafka.send_when_caught_up = c.send_when_caught_up;
    cfg.delivery = c.delivery;
    cfg.checkpoint.enabled = c.delivery == config::Delivery::exactly_once;
    Harness h(cfg);
    h.source.push(relation());
    h.txn(0x1000, 3);
    h.run({[] {}, [&h] { h.source.caught_up(); }, [] {}, [] {}});
    EXPECT_EQ(h.script.sends_now, c.expected)
        << "send_when_caught_up " << c.send_when_caught_up << ", delivery " << static_cast<int>(c.delivery);
    EXPECT_EQ(h.source.flush, Lsn{0x1000});
  }
}

// Confirm order: a transaction is confirmed only when it and every one before it is acked,
// whatever order the acks come in (I2).
TEST(RelayUnit, ConfirmsInTransactionOrderWhateverTheAckOrder) {
  struct Case {
    std::vector<std::size_t> ack_order;   // indexes of produced records (txn1: 0,1; txn2: 2,3)
    std::vector<std::uint64_t> expected;  // the flush after each ack
  };
  const std::vector<Case> cases = {
      {{0, 1, 2, 3}, {0x100, 0x1000, 0x1000, 0x2000}},
      {{3, 2, 1, 0}, {0x100, 0x100, 0x100, 0x2000}},
      {{2, 0, 3, 1}, {0x100, 0x100, 0x100, 0x2000}},
      {{1, 3, 0, 2}, {0x100, 0x100, 0x1000, 0x2000}},
  };
  for (const auto& c : cases) {
    Harness h;
    h.script.hold = true;
    h.source.push(relation());
    h.txn(0x1000, 2, 1);
    h.txn(0x2000, 2, 3);
    std::vector<Lsn> seen;
    std::vector<std::function<void()>> steps = {[] {}, [] {}};
    for (const auto i : c.ack_order) {
      steps.push_back([&h, i] { h.script.release(i); });
      steps.push_back([&h, &seen] { seen.push_back(h.source.flush); });
    }
    h.run(steps);
    std::vector<Lsn> expected;
    for (const auto e : c.expected) expected.push_back(Lsn{e});
    EXPECT_EQ(seen, expected) << "ack order " << ::testing::PrintToString(c.ack_order);
  }
}

TEST(RelayUnit, BackpressurePausesAtTheCapAndResumesBelowTheResumeRatio) {
  Harness h;
  h.config.limits.max_in_flight_records = 4;
  h.config.limits.resume_ratio = 0.5;
  h.script.hold = true;
  h.source.push(relation());
  h.txn(0x1000, 10);
  std::vector<std::size_t> produced;
  std::vector<bool> paused;
  const auto look = [&] {
    produced.push_back(h.script.produced.size());
    paused.push_back(h.source.paused());
  };
  const auto release_all = [&] { h.script.release_all(); };
  h.run({[] {}, look, [&] { h.script.release(0); }, look, [&] { h.script.release(1); }, look, release_all, look,
         release_all, look, release_all});
  // At the cap (4) reading stops; one ack (3 left) is above 0.5·4; two acks (2 left) resume.
  EXPECT_EQ(produced[0], 4U);
  EXPECT_TRUE(paused[0]);
  EXPECT_EQ(produced[1], 4U);
  EXPECT_TRUE(paused[1]);
  EXPECT_EQ(produced[2], 6U);
  EXPECT_TRUE(paused[2]);
  EXPECT_EQ(h.counters.records_acked, 10U);
  EXPECT_GE(h.counters.pauses, 2U);
  EXPECT_EQ(h.source.flush, Lsn{0x1000});
}

// Defect 9 (found by the simulator): rows that cannot become records go to the poison policy at
// once, and that path applied no backpressure, so poison rows in a row were read past the cap.
TEST(RelayUnit, PoisonRowsCountInTheCapsLikeRecords) {
  Harness h;
  h.config.tables[0].validate_json = true;
  h.config.poison.policy = config::PoisonPolicy::dead_letter;
  h.config.poison.max_retries = 0;
  h.config.limits.max_in_flight_records = 4;
  h.config.limits.resume_ratio = 0.5;
  h.script.hold = true;              // the dead-letter writes wait for their acknowledgement
  MessageBuilder text_payload('R');  // the outbox with a text payload, which validate_json checks
  text_payload.int32(kRelid).string("public").string("outbox").int8('d').int16(5);
  text_payload.relation_column(1, "id", kUuid, -1).relation_column(0, "aggregatetype", kText, -1);
  text_payload.relation_column(0, "aggregateid", kText, -1).relation_column(0, "type", kText, -1);
  text_payload.relation_column(0, "payload", kText, -1);
  h.source.push(text_payload);
  h.txn(0x1000, 10, 1, "not json");
  std::size_t produced = 0;
  bool paused = false;
  std::uint64_t in_flight = 0;
  h.run({[] {},
         [&] {
           produced = h.script.produced.size();
           paused = h.source.paused();
           in_flight = h.relay().in_flight_records();
         },
         [&] { h.script.release_all(); }, [] {}, [&] { h.script.release_all(); }, [] {},
         [&] { h.script.release_all(); }});
  EXPECT_EQ(produced, 4U) << "dead-letter writes before reading stopped";
  EXPECT_TRUE(paused);
  EXPECT_LE(in_flight, 4U);
  EXPECT_EQ(h.counters.dead_lettered, 10U);
  EXPECT_EQ(h.source.flush, Lsn{0x1000});
}

TEST(RelayUnit, StopWaitsForOutstandingAcksAndConfirmsThem) {
  Harness h;
  h.script.hold = true;
  h.stop_when_done = false;
  h.source.push(relation());
  h.txn(0x1000, 2);
  Lsn before_ack;
  const auto outcome = h.run({[] {}, [&] { h.relay().stop(); }, [&] { before_ack = h.source.flush; },
                              [&] { h.script.release(0); }, [&] { h.script.release(1); }});
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped);
  EXPECT_TRUE(outcome.reason.empty()) << outcome.reason;
  EXPECT_EQ(before_ack, Lsn{0x100});
  EXPECT_EQ(h.source.flush, Lsn{0x1000});
  EXPECT_FALSE(h.timed_out);
}

TEST(RelayUnit, StopAfterTheShutdownTimeoutConfirmsNothingUnacknowledged) {
  Harness h;
  h.script.hold = true;
  h.stop_when_done = false;
  h.source.push(relation());
  h.txn(0x1000, 2);
  const auto outcome = h.run({[] {}, [&] { h.relay().stop(); }});
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped);
  EXPECT_EQ(outcome.reason, "shutdown timeout with 2 record(s) unacknowledged");
  EXPECT_TRUE(outcome.unacknowledged);  // exit 8: nothing lost, but the operator must know
  EXPECT_EQ(h.source.flush, Lsn{0x100});
}

// Issue 12 #9: the slot stands at 0/5000; a keepalive during catch-up says 0/4000. No status
// update may carry a position below the slot's.
TEST(RelayUnit, NeverConfirmsBelowTheSlotsPositionAtStart) {
  Harness h;
  h.source.keepalive(Lsn{0x4000});
  h.source.push(relation());
  h.txn(0x4800, 1);
  h.source.keepalive(Lsn{0x4900});
  h.run({}, Lsn{0x5000});
  ASSERT_FALSE(h.source.flushes.empty());
  for (const auto lsn : h.source.flushes) EXPECT_GE(lsn, Lsn{0x5000}) << lsn.to_string();
}

// Issue 12 #6: a full producer queue never blocks the io thread: the relay pauses, tries again
// on a timer, and sends in the original order, retried sends before new ones.
TEST(RelayUnit, QueueFullPausesAndRetriesInOrderWithoutBlocking) {
  Harness h;
  h.script.queue_full = 30;  // ~30 timer rounds
  h.source.push(relation());
  h.txn(0x1000, 3);
  h.source.keepalive(Lsn{0x1000});
  bool paused_meanwhile = false;
  int steps_run = 0;
  const auto outcome = h.run({[] {},
                              [&] {
                                paused_meanwhile = h.source.paused();
                                ++steps_run;
                              },
                              [&] { ++steps_run; }});
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped);
  EXPECT_TRUE(paused_meanwhile);
  EXPECT_EQ(steps_run, 2);  // timers ran while the queue was full
  ASSERT_EQ(h.script.produced.size(), 3U);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(h.script.produced[i].record.event_id, fmt::format("00000000-0000-0000-0000-{:012d}", i + 1));
  EXPECT_GE(h.counters.queue_full, 1U);
  EXPECT_EQ(h.source.flush, Lsn{0x1000});
}

struct PoisonCase {
  const char* name;
  config::PoisonPolicy policy;
  std::uint32_t max_retries;
  bool alone_ok;  // the record is accepted when sent alone (it was another record's batch)
  Outcome::Kind outcome;
  std::uint64_t flush;
  std::size_t isolated_sends;
  std::uint64_t skipped, dead_lettered;
};

TEST(RelayUnit, PoisonPoliciesTable) {
  const std::vector<PoisonCase> cases = {
      {"batch refusal, accepted alone", config::PoisonPolicy::stop, 2, true, Outcome::Kind::stopped, 0x1000, 1, 0, 0},
      {"stop after retries", config::PoisonPolicy::stop, 2, false, Outcome::Kind::fatal, 0x100, 3, 0, 0},
      {"skip after retries", config::PoisonPolicy::skip, 2, false, Outcome::Kind::stopped, 0x1000, 3, 1, 0},
      {"dead-letter after a retry", config::PoisonPolicy::dead_letter, 1, false, Outcome::Kind::stopped, 0x1000, 2, 0,
       1},
      {"skip without retries", config::PoisonPolicy::skip, 0, false, Outcome::Kind::stopped, 0x1000, 1, 1, 0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Harness h;
    h.config.poison.policy = c.policy;
    h.config.poison.max_retries = c.max_retries;
    h.script.verdict = [&c](const Produced& p) -> std::optional<kafka::DeliveryError> {
      if (p.record.value != "{\"poison\": true}") return std::nullopt;
      if (p.isolated && (c.alone_ok || p.cookie.dead_letter)) return std::nullopt;
      return refused_for_size();
    };
    h.source.push(relation());
    h.txn(0x1000, 1, 1, "{\"poison\": true}");
    const auto outcome = h.run();
    EXPECT_EQ(outcome.kind, c.outcome) << outcome.reason;
    if (c.outcome == Outcome::Kind::fatal) {
      EXPECT_EQ(outcome.cause, Fatal::poison);
      EXPECT_NE(outcome.reason.find("MSG_SIZE_TOO_LARGE"), std::string::npos) << outcome.reason;
    }
    EXPECT_EQ(h.source.flush, Lsn{c.flush});
    std::size_t isolated = 0;
    for (const auto& p : h.script.produced) isolated += p.isolated && !p.cookie.dead_letter ? 1 : 0;
    EXPECT_EQ(isolated, c.isolated_sends);
    EXPECT_EQ(h.counters.skipped, c.skipped);
    EXPECT_EQ(h.counters.dead_lettered, c.dead_lettered);
  }
}

// Issue 12 #5: a record refused for its size is dead-lettered without its value (a copy would
// be refused too), with its size and SHA-256 in headers.
TEST(RelayUnit, SizeRefusalIsDeadLetteredWithoutTheValue) {
  Harness h;
  h.config.poison.policy = config::PoisonPolicy::dead_letter;
  h.config.poison.max_retries = 0;
  const std::string big = "{\"big\": \"" + std::string(2000, 'x') + "\"}";
  h.script.verdict = [](const Produced& p) -> std::optional<kafka::DeliveryError> {
    if (p.record.value.size() > 1000) return refused_for_size();
    return std::nullopt;
  };
  h.source.push(relation());
  h.txn(0x1000, 1, 1, big);
  std::uint64_t in_flight_bytes_after = 1;
  h.stop_when_done = false;
  const auto outcome = h.run({[] {}, [] {},
                              [&] {
                                in_flight_bytes_after = h.relay().in_flight_bytes();
                                h.relay().stop();
                              }});
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  EXPECT_EQ(h.counters.dead_lettered, 1U);
  EXPECT_EQ(h.source.flush, Lsn{0x1000});
  ASSERT_FALSE(h.script.produced.empty());
  const auto& dlq = h.script.produced.back();
  ASSERT_TRUE(dlq.cookie.dead_letter);
  EXPECT_EQ(dlq.record.topic, "dlq");
  EXPECT_TRUE(dlq.record.value.empty());
  std::map<std::string, std::string> headers;
  for (const auto& hd : dlq.record.headers) headers[hd.name] = hd.value;
  EXPECT_EQ(headers["pgoutbox.dlq.value.size"], std::to_string(big.size()));
  EXPECT_EQ(headers["pgoutbox.dlq.value.sha256"].size(), 64U);
  EXPECT_EQ(headers["pgoutbox.dlq.error.code"], "MSG_SIZE_TOO_LARGE");
  EXPECT_EQ(headers["pgoutbox.dlq.topic"], "outbox.event.E");
  EXPECT_EQ(in_flight_bytes_after, 0U) << "the original's weight must be released with the copy's ack";
}

TEST(RelayUnit, TransientFailuresAreSentAgainUntilAccepted) {
  Harness h;
  int failures = 3;
  h.script.verdict = [&failures](const Produced&) -> std::optional<kafka::DeliveryError> {
    if (failures-- > 0)
      return kafka::DeliveryError{kafka::DeliveryFailure::retriable, "REQUEST_TIMED_OUT", "timeout", false};
    return std::nullopt;
  };
  h.source.push(relation());
  h.txn(0x1000, 1);
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped);
  EXPECT_EQ(h.script.produced.size(), 4U);
  EXPECT_EQ(h.counters.records_acked, 1U);
  EXPECT_EQ(h.source.flush, Lsn{0x1000});
}

TEST(RelayUnit, AFatalProducerErrorRebuildsWithoutConfirmingPastIt) {
  {  // reported with a delivery
    Harness h;
    h.source.push(relation());
    h.txn(0x1000, 1);
    h.script.verdict = [](const Produced&) -> std::optional<kafka::DeliveryError> {
      return kafka::DeliveryError{kafka::DeliveryFailure::fatal, "_FATAL", "fenced", false};
    };
    const auto outcome = h.run();
    EXPECT_EQ(outcome.kind, Outcome::Kind::reconnect) << outcome.reason;
    EXPECT_EQ(h.source.flush, Lsn{0x100});
  }
  {  // found by the poll timer while records are in flight
    Harness h;
    h.script.hold = true;
    h.stop_when_done = false;
    h.source.push(relation());
    h.txn(0x1000, 1);
    const auto outcome = h.run(
        {[] {},
         [&] {
           h.script.fatal = kafka::SinkFatal{kafka::SinkFatal::Kind::idempotence, "OUT_OF_ORDER_SEQUENCE_NUMBER: gap"};
         }});
    EXPECT_EQ(outcome.kind, Outcome::Kind::reconnect) << outcome.reason;
    EXPECT_NE(outcome.reason.find("OUT_OF_ORDER_SEQUENCE_NUMBER"), std::string::npos);
    EXPECT_EQ(h.source.flush, Lsn{0x100});
    EXPECT_FALSE(h.timed_out);
  }
}

TEST(RelayUnit, AnUndecodableMessageEndsTheSessionAsAnInternalError) {
  Harness h;
  h.source.push(MessageBuilder('B').int32(1));  // truncated Begin
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::fatal);
  EXPECT_EQ(outcome.cause, Fatal::internal);
}

std::string event(int n) { return fmt::format("00000000-0000-0000-0000-{:012d}", n); }

// The event numbers of key `key`, in the order a consumer of their topic would read them.
std::vector<int> landed_of(const SinkScript& script, std::string_view key) {
  std::vector<int> out;
  for (const auto& r : script.landed) {
    if (r.key && *r.key == key && r.topic != "dlq") out.push_back(std::stoi(r.event_id.substr(24)));
  }
  return out;
}

// The first copy of each: what I4 orders (a session that ends replays its unconfirmed suffix).
std::vector<int> first_landed_of(const SinkScript& script, std::string_view key) {
  std::vector<int> out;
  for (const int n : landed_of(script, key)) {
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  }
  return out;
}

// Issue 36 (docs/spec.md I4): Kafka refuses a batch for good while later batches of the partition
// are in flight. librdkafka writes those after bumping its epoch, so re-sending the refused
// records alone put them after later records of their keys. The stream's producer is gapless
// now: it stops at the refused batch (the later ones are never written), the session ends at
// once, and the next one sends the refused records alone, in their places.
TEST(RelayUnit, RecordsRefusedWithTheirBatchLandBeforeTheLaterRecordsThatWereInFlight) {
  Harness h;
  h.config.poison.policy = config::PoisonPolicy::dead_letter;
  h.config.poison.max_retries = 0;
  std::set<std::string> sent;
  h.script.verdict = [&sent](const Produced& p) -> std::optional<kafka::DeliveryError> {
    const bool first_send = sent.insert(p.record.event_id).second;
    if (p.cookie.dead_letter) return std::nullopt;
    // The batch of transaction 1 is refused (for p2); p2 is refused alone too.
    if ((!p.isolated && first_send && p.record.event_id <= event(3)) || p.record.event_id == event(2)) {
      return kafka::DeliveryError{kafka::DeliveryFailure::permanent, "POLICY_VIOLATION", "Broker: Policy violation",
                                  false};
    }
    return std::nullopt;
  };
  h.source.push(relation());
  h.source.push(begin(0x1000 - 8, 1));
  h.source.push(insert(1, "k"));
  h.source.push(insert(2, "p"));
  h.source.push(insert(3, "k"));
  h.source.push(commit(0x1000 - 8, 0x1000), Lsn{0x1000});
  h.source.push(begin(0x2000 - 8, 2));  // in flight when transaction 1's batch is refused
  h.source.push(insert(4, "k"));
  h.source.push(insert(5, "k"));
  h.source.push(commit(0x2000 - 8, 0x2000), Lsn{0x2000});
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  EXPECT_EQ(first_landed_of(h.script, "k"), (std::vector<int>{1, 3, 4, 5}));
  EXPECT_EQ(h.counters.dead_lettered, 1U);
  EXPECT_EQ(h.sessions, 2);
  EXPECT_EQ(h.source.flush, Lsn{0x2000});
}

// The memory of refused records (session_start.h) keeps what a later session may publish again,
// and a session's start forgets the transactions the slot confirmed (issue 37 item 7).
TEST(RelayUnit, TheRefusalMemoryForgetsWhatTheSlotConfirmed) {
  Harness h;
  const auto record = [](int n) {
    outbox::Record r;
    r.topic = "outbox.event.E";
    r.event_id = event(n);
    return r;
  };
  (*h.refused)[refused_key(Lsn{0x50}, record(1))] = RefusedRecord{};
  (*h.refused)[refused_key(Lsn{0x2000 - 8}, record(2))] = RefusedRecord{};
  h.source.push(relation());
  const auto outcome = h.run({}, Lsn{0x100});
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  EXPECT_EQ(h.refused->count(refused_key(Lsn{0x50}, record(1))), 0U);
  EXPECT_EQ(h.refused->count(refused_key(Lsn{0x2000 - 8}, record(2))), 1U);
}

// Issue 12 #11: per-key order (I4) on every failure path. Transaction 1 writes k1, p2 (a record
// Kafka refuses for itself) and k3; their batch is refused, or times out. Transaction 2 (k4, k5)
// is read after that failure was reported, while the failed records wait to be sent again
// (alone, through the isolated sink, whose acks the test releases later). Key k must be read
// 1, 3, 4, 5 whatever the trigger.
TEST(RelayUnit, AFailedRecordHoldsTheLaterRecordsOfItsTopicUntilSettled) {
  struct Case {
    const char* name;
    kafka::DeliveryError batch_error;  // what every record of transaction 1's first send gets
    bool poison_alone;                 // p2 is refused alone too (then dead-lettered)
  };
  const std::vector<Case> cases = {
      {"MSG_SIZE_TOO_LARGE", refused_for_size(), true},
      {"INVALID_TIMESTAMP",
       {kafka::DeliveryFailure::permanent, "INVALID_TIMESTAMP", "Broker: Invalid timestamp", false},
       true},
      {"INVALID_RECORD", {kafka::DeliveryFailure::permanent, "INVALID_RECORD", "Broker: Invalid record", false}, true},
      {"retriable (timed out)",
       {kafka::DeliveryFailure::retriable, "MSG_TIMED_OUT", "Local: Message timed out", false},
       false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Harness h;
    h.config.poison.policy = config::PoisonPolicy::dead_letter;
    h.config.poison.max_retries = 0;
    h.config.poison.retry_backoff = 20ms;
    h.script.hold_isolated = true;
    std::set<std::string> sent;  // a timed-out record goes through when sent again
    h.script.verdict = [&c, &sent](const Produced& p) -> std::optional<kafka::DeliveryError> {
      const bool first_send = sent.insert(p.record.event_id).second;
      if (!p.isolated && first_send && p.record.event_id <= event(3)) return c.batch_error;
      if (p.isolated && !p.cookie.dead_letter && c.poison_alone && p.record.event_id == event(2)) {
        return c.batch_error;
      }
      return std::nullopt;
    };
    h.source.push(relation());
    h.source.push(begin(0x1000 - 8, 1));
    h.source.push(insert(1, "k"));
    h.source.push(insert(2, "p"));
    h.source.push(insert(3, "k"));
    h.source.push(commit(0x1000 - 8, 0x1000), Lsn{0x1000});
    std::vector<std::function<void()>> steps = {[] {}, [] {},
                                                [&h] {
                                                  h.source.push(begin(0x2000 - 8, 2));
                                                  h.source.push(insert(4, "k"));
                                                  h.source.push(insert(5, "k"));
                                                  h.source.push(commit(0x2000 - 8, 0x2000), Lsn{0x2000});
                                                  h.source.pump();
                                                },
                                                [] {}};
    for (int i = 0; i < 40; ++i) steps.push_back([&h] { h.script.release_all(); });
    const auto outcome = h.run(steps);
    EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
    EXPECT_FALSE(h.timed_out);
    EXPECT_EQ(first_landed_of(h.script, "k"), (std::vector<int>{1, 3, 4, 5}));
    EXPECT_EQ(h.sessions, c.batch_error.kind == kafka::DeliveryFailure::permanent ? 2 : 1)
        << "a batch refused for good ends its session once; its records are sent alone in the next";
    EXPECT_EQ(h.counters.dead_lettered, c.poison_alone ? 1U : 0U);
    EXPECT_EQ(landed_of(h.script, "p"), c.poison_alone ? std::vector<int>{} : std::vector<int>{2});
    EXPECT_EQ(h.source.flush, Lsn{0x2000});
  }
}

// A refusal by produce() itself (the record is larger than the producer accepts) while earlier
// records of its key are in flight and fail: the failures reported later still go first.
TEST(RelayUnit, ARefusalAtProduceGoesAfterTheEarlierFailuresOfItsTopic) {
  Harness h;
  h.config.poison.policy = config::PoisonPolicy::dead_letter;
  h.config.poison.max_retries = 0;
  h.script.hold = true;
  std::set<std::string> sent;  // a timed-out record goes through when sent again
  h.script.verdict = [&sent](const Produced& p) -> std::optional<kafka::DeliveryError> {
    if (sent.insert(p.record.event_id).second && p.record.event_id == event(1)) {
      return kafka::DeliveryError{kafka::DeliveryFailure::retriable, "MSG_TIMED_OUT", "Local: Message timed out",
                                  false};
    }
    return std::nullopt;
  };
  h.script.refuse = [](const outbox::Record& r) { return r.event_id == event(2) && r.topic != "dlq"; };
  h.source.push(relation());
  h.txn(0x1000, 3);
  std::vector<std::function<void()>> steps;
  for (int i = 0; i < 40; ++i) steps.push_back([&h] { h.script.release_all(); });
  const auto outcome = h.run(steps);
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  // 2 is dead-lettered (refused alone too); 1 goes again before 3.
  EXPECT_EQ(landed_of(h.script, "k"), (std::vector<int>{1, 3}));
  EXPECT_EQ(h.counters.dead_lettered, 1U);
  EXPECT_EQ(h.source.flush, Lsn{0x1000});
}

// Issue 19 #2: a burst of failing records (every row its own topic, so all their retries fall
// due together), under a byte cap that holds a tenth of them, then under one that holds all.
// Everything held for a retry, or on its way to the dead-letter topic, counts against the caps
// (the stream pauses); one round of retry work is bounded, so a keepalive that comes meanwhile is
// answered between rounds, not after the whole burst.
TEST(RelayUnit, ABurstOfFailingRecordsStaysUnderTheCapsAndKeepalivesAreAnswered) {
  constexpr int kRows = 400;
  const std::string payload = "{\"pad\": \"" + std::string(100, 'x') + "\"}";
  const std::uint64_t weight = payload.size() + 1;  // key "k" + value
  for (const std::uint64_t cap : {weight * kRows / 10, weight * kRows * 2}) {
    SCOPED_TRACE(cap);
    Harness h;
    h.config.poison.policy = config::PoisonPolicy::dead_letter;
    h.config.poison.max_retries = 1;
    h.config.limits.max_in_flight_bytes = cap;
    h.config.limits.max_in_flight_records = 10 * kRows;
    // The harness stops the relay once everything is read, while retries are still due: the
    // stop must wait for all of them, also on a loaded machine.
    h.config.shutdown_timeout = 10s;
    h.time_limit = 20s;
    // Refused by produce() itself (as librdkafka refuses a record above message.max.bytes), alone
    // too: each is held and retried in this session. (A batch the broker refuses ends the session
    // instead, AFailedRecordHoldsTheLaterRecordsOfItsTopicUntilSettled.)
    h.script.refuse = [](const outbox::Record& r) { return r.topic != "dlq"; };
    std::uint64_t most_bytes = 0;
    std::size_t isolated_before_keepalive = 0, isolated_total = 0;
    bool keepalive_asked = false, keepalive_answered = false;
    h.script.on_refuse = [&](const outbox::Record&, bool isolated) {
      most_bytes = std::max(most_bytes, h.relay().in_flight_bytes());
      if (!isolated) return;
      ++isolated_total;
      if (!keepalive_asked) {
        keepalive_asked = true;
        h.source.keepalive_soon(Lsn{0x100}, [&] {
          keepalive_answered = true;
          isolated_before_keepalive = isolated_total;
        });
      }
    };
    h.source.push(relation());
    for (int i = 1; i <= kRows; ++i) {
      const auto end = 0x1000 * static_cast<std::uint64_t>(i);
      h.source.push(begin(end - 8, static_cast<std::uint32_t>(i)));
      h.source.push(insert(i, "k", payload, fmt::format("T{}", i)));
      h.source.push(commit(end - 8, end), Lsn{end});
    }
    const auto outcome = h.run();
    EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
    EXPECT_FALSE(h.timed_out);
    EXPECT_EQ(h.counters.dead_lettered, static_cast<std::uint64_t>(kRows));
    EXPECT_EQ(h.source.flush, Lsn{0x1000 * static_cast<std::uint64_t>(kRows)});
    EXPECT_LE(most_bytes, cap + weight);  // the cap is checked after a record is read
    EXPECT_GT(most_bytes, 0U);
    ASSERT_TRUE(keepalive_answered);
    EXPECT_LE(isolated_before_keepalive, 64U + 1U)
        << "a keepalive waited for " << isolated_before_keepalive << " retry sends";
  }
}

}  // namespace
}  // namespace pgoutbox::relay
