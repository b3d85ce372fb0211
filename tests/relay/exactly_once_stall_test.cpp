// Exactly-once never waits forever with nothing said (docs/spec.md I12; issue 24 items 1, 2, 4
// and 5), against the fake transactional sink: a refusal reported while a commit waits for its
// reports aborts, and the transaction is published again; a Postgres transaction larger than the producer's queue is
// read to its end and committed; a dead-letter write Kafka refuses stops pgoutbox as in at-least-once; the checkpoint
// never goes into a Kafka transaction ahead of records still waiting for the queue.

#include <gtest/gtest.h>

#include <algorithm>

#include "relay_fakes.h"

namespace pgoutbox::relay {
namespace {

using namespace pgoutbox::relay::testing;

config::Config exactly_once() {
  auto c = test_config();
  c.delivery = config::Delivery::exactly_once;
  c.kafka.transaction_interval = 50ms;
  return c;
}

std::string id(int n) { return fmt::format("00000000-0000-0000-0000-{:012d}", n); }

bool aborted(const SinkScript& script) {
  return std::find(script.txn_calls.begin(), script.txn_calls.end(), "abort") != script.txn_calls.end();
}

// Issue 24 item 1: the refusal's report comes after the commit started (the checkpoint is
// produced, the commit waits for the reports). It must abort and publish the transaction again
// (in the same session, the refused record alone, until poison.policy applies), instead of
// waiting for a commit that never comes.
TEST(ExactlyOnceStalls, ARefusalReportedDuringACommitAbortsIt) {
  auto config = exactly_once();
  config.poison.policy = config::PoisonPolicy::dead_letter;
  config.poison.max_retries = 0;
  Harness h(config);
  h.script.hold = true;
  h.script.verdict = [](const Produced& p) -> std::optional<kafka::DeliveryError> {
    if (p.record.event_id == id(2) && p.record.topic != "dlq") return refused_for_size();
    return std::nullopt;
  };
  h.source.push(relation());
  h.txn(0x1000, 3, 1);
  std::vector<std::function<void()>> steps(20, [] {});
  steps[5] = [&] { h.source.caught_up(); };  // the commit starts: the checkpoint is produced
  steps[10] = [&] {
    ASSERT_TRUE(std::any_of(h.script.produced.begin(), h.script.produced.end(), [](const Produced& p) {
      return p.cookie.is_checkpoint();
    })) << "the commit did not start";
    h.script.hold = false;
    h.script.release_all();  // record 2's refusal arrives while the commit waits
  };
  const auto outcome = h.run(steps);
  EXPECT_FALSE(h.timed_out) << "stalled: the refusal during the commit was never acted on";
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  EXPECT_EQ(h.sessions, 1);
  EXPECT_TRUE(aborted(h.script));
  EXPECT_EQ(h.counters.records_acked, 2U);
  EXPECT_EQ(h.counters.dead_lettered, 1U);
  EXPECT_EQ(h.source.flush, Lsn{0x1000});
}

// Issue 24 item 2: one Postgres transaction of 400 rows through a producer queue of 16 records,
// with in-flight caps of 50: the queue refuses again and again inside the transaction, where the
// caps cannot apply (its records wait for its commit, which comes only after its Commit message).
// Reading must go on whenever the queue has room, up to the Commit, and everything is committed.
TEST(ExactlyOnceStalls, ATransactionLargerThanTheQueueIsReadToItsEndAndCommitted) {
  auto config = exactly_once();
  config.limits.max_in_flight_records = 50;
  Harness h(config);
  h.script.capacity = 16;
  h.script.hold = true;
  h.time_limit = 10s;
  h.source.push(relation());
  h.txn(0x1000, 400, 1);
  h.txn(0x2000, 3, 401);
  // The broker acknowledges what it holds every millisecond.
  std::vector<std::function<void()>> steps(2000, [&] { h.script.release_all(); });
  steps[1999] = [&] {
    h.script.hold = false;
    h.script.release_all();
  };
  const auto outcome = h.run(steps);
  EXPECT_FALSE(h.timed_out) << "stalled inside the transaction";
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  std::size_t records = 0;
  for (const auto& r : h.script.committed) records += r.topic != "pgoutbox.checkpoints" ? 1 : 0;
  EXPECT_EQ(records, 403U);
  EXPECT_EQ(h.source.flush, Lsn{0x2000});
}

// Issue 24 item 4: the record is refused, and after poison.max_retries its dead-letter write is
// refused too. At-least-once exits 4 (poison) then; exactly-once must as well, not abort and
// retry the dead-letter write forever.
TEST(ExactlyOnceStalls, ARefusedDeadLetterWriteStopsWithThePoisonCode) {
  auto config = exactly_once();
  config.poison.max_retries = 0;
  config.poison.policy = config::PoisonPolicy::dead_letter;
  auto refused = std::make_shared<RefusedRecords>();
  std::optional<Outcome> last;
  for (int session = 1; session <= 5 && !(last && last->kind == Outcome::Kind::fatal); ++session) {
    Harness h(config);
    h.refused = refused;
    h.script.verdict = [](const Produced& p) -> std::optional<kafka::DeliveryError> {
      if (p.record.event_id == id(2)) return refused_for_size();  // its dead-letter copy too
      return std::nullopt;
    };
    h.source.push(relation());
    h.txn(0x1000, 3, 1);
    h.stop_when_done = false;
    last = h.run();
    EXPECT_FALSE(h.timed_out) << "session " << session;
    EXPECT_TRUE(h.script.committed.empty()) << "session " << session;
  }
  ASSERT_TRUE(last);
  ASSERT_EQ(last->kind, Outcome::Kind::fatal) << last->reason;
  EXPECT_EQ(last->cause, Fatal::poison);
}

// Issue 24 item 5: a record of the unit still waits for room in the producer's queue when the
// commit starts. The checkpoint must go after it, into the same Kafka transaction, and the
// commit must wait for both: a checkpoint committed without a record it covers would make the
// next start skip that record. Reached through a non-transactional logical message: it is poison
// and its dead-letter write, which finds the queue full, is followed at once by the unit's end,
// with no message read in between that the full queue could pause.
TEST(ExactlyOnceStalls, TheCheckpointIsNeverCommittedAheadOfARecordItCovers) {
  auto config = exactly_once();
  config::MessageConfig m;
  m.prefix = "outbox";
  config.messages.push_back(m);
  config.poison.policy = config::PoisonPolicy::dead_letter;
  Harness h(config);
  bool room = false;
  h.script.full_for = [&](const outbox::Record& r) { return r.topic == "dlq" && !room; };
  const std::string envelope = R"({"id":"m1","aggregatetype":"E","aggregateid":"k","payload":{}})";
  h.source.push(MessageBuilder('M')
                    .int8(0)
                    .int64(0x900)
                    .string("outbox")
                    .int32(static_cast<std::uint32_t>(envelope.size()))
                    .raw(envelope),
                Lsn{0x900});
  std::vector<std::function<void()>> steps(30, [] {});
  steps[0] = [&] { h.source.caught_up(); };  // the commit starts while the dead-letter write waits
  steps[25] = [&] { room = true; };
  const auto outcome = h.run(steps);
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  // Whatever was committed: the checkpoint comes after the dead-letter record it covers.
  bool dead_lettered = false;
  for (const auto& r : h.script.committed) {
    if (r.topic == "dlq") dead_lettered = true;
    if (r.topic == "pgoutbox.checkpoints") {
      EXPECT_TRUE(dead_lettered) << "a checkpoint was committed ahead of the record it covers: " << r.value;
    }
  }
  EXPECT_TRUE(dead_lettered);
}

// Kafka refuses a whole batch when one record of it is too large: every record of the batch
// reports the refusal. Only the record refused alone is poison; the others arrive (found by
// the real-service test of issue 24 item 1, where five innocent rows were dead-lettered).
TEST(ExactlyOnceStalls, ABatchRefusalDeadLettersOnlyTheRecordRefusedAlone) {
  auto config = exactly_once();
  config.poison.max_retries = 1;
  config.poison.policy = config::PoisonPolicy::dead_letter;
  auto refused = std::make_shared<RefusedRecords>();
  std::optional<Outcome> last;
  std::vector<std::string> delivered;
  std::vector<std::string> dead;
  for (int session = 1; session <= 6; ++session) {
    Harness h(config);
    h.refused = refused;
    h.script.verdict = [](const Produced& p) -> std::optional<kafka::DeliveryError> {
      if (p.record.topic == "dlq") return std::nullopt;
      const bool big = p.record.event_id == id(2);
      // In a batch, records 1 to 3 share the big one's fate; alone, only the big one is refused.
      if (big || (!p.cookie.isolated && p.record.event_id <= id(3))) return refused_for_size();
      return std::nullopt;
    };
    h.source.push(relation());
    h.txn(0x1000, 4, 1);
    h.stop_when_done = false;
    h.time_limit = 1s;
    last = h.run();
    if (!h.script.committed.empty()) {
      for (const auto& r : h.script.committed) {
        if (r.topic == "dlq") dead.push_back(r.event_id);
        if (r.topic == "outbox.event.E") delivered.push_back(r.event_id);
      }
      break;
    }
    ASSERT_EQ(last->kind, Outcome::Kind::reconnect) << "session " << session << ": " << last->reason;
  }
  EXPECT_EQ(delivered, (std::vector<std::string>{id(1), id(3), id(4)}));
  EXPECT_EQ(dead, (std::vector<std::string>{id(2)}));
}

// Issue 24 item 7: a fence is a kind the sink reports, not a word in a message. A fatal
// producer error whose text mentions a fence (as a coordinator's abort after a long outage may)
// rebuilds the producer; only a fence ends the instance with its own code.
TEST(ExactlyOnceStalls, OnlyAFenceIsAFence) {
  {
    Harness h(exactly_once());
    h.script.hold = true;
    h.stop_when_done = false;
    h.source.push(relation());
    h.txn(0x1000, 1);
    const auto outcome = h.run({[] {},
                                [&] {
                                  h.script.fatal = kafka::SinkFatal{
                                      kafka::SinkFatal::Kind::idempotence,
                                      "_FATAL: producer epoch bumped (FENCED by the coordinator's timeout)"};
                                }});
    EXPECT_EQ(outcome.kind, Outcome::Kind::reconnect) << outcome.reason;
    EXPECT_EQ(h.source.flush, Lsn{0x100});
  }
  {
    Harness h(exactly_once());
    h.script.verdict = [](const Produced&) -> std::optional<kafka::DeliveryError> {
      return kafka::DeliveryError{kafka::DeliveryFailure::fenced, "PRODUCER_FENCED", "Broker: producer fenced", false};
    };
    h.stop_when_done = false;
    h.source.push(relation());
    h.txn(0x1000, 1);
    const auto outcome = h.run();
    ASSERT_EQ(outcome.kind, Outcome::Kind::fatal) << outcome.reason;
    EXPECT_EQ(outcome.cause, Fatal::fenced);
    EXPECT_TRUE(h.script.committed.empty());
  }
  {
    // As librdkafka reports it: the records fail with _FATAL, and only the producer's fatal
    // state names the fence (the fault suite's woken zombie under ASan took the reconnect).
    Harness h(exactly_once());
    h.script.verdict = [&h](const Produced&) -> std::optional<kafka::DeliveryError> {
      h.script.fatal = kafka::SinkFatal{kafka::SinkFatal::Kind::fenced, "_FENCED: Producer fenced by newer instance"};
      return kafka::DeliveryError{kafka::DeliveryFailure::fatal, "_FATAL", "Local: Fatal error", false};
    };
    h.stop_when_done = false;
    h.source.push(relation());
    h.txn(0x1000, 1);
    const auto outcome = h.run();
    ASSERT_EQ(outcome.kind, Outcome::Kind::fatal) << outcome.reason;
    EXPECT_EQ(outcome.cause, Fatal::fenced);
  }
  {
    // The session ends for another reason (the replication connection is gone, as for an
    // instance woken after a takeover) with a transaction open: its abort meets the fence.
    Harness h(exactly_once());
    h.script.hold = true;
    h.script.abort_result = [] { return kafka::TxnResult{kafka::TxnStatus::fenced, "PRODUCER_FENCED: fenced"}; };
    h.stop_when_done = false;
    h.source.push(relation());
    h.txn(0x1000, 1);
    const auto outcome = h.run({[] {}, [&] { h.source.stop(); }});
    ASSERT_EQ(outcome.kind, Outcome::Kind::fatal) << outcome.reason;
    EXPECT_EQ(outcome.cause, Fatal::fenced);
  }
}

// An instance woken from a long pause after a takeover: its session ends (the replication
// connection is gone) before librdkafka has heard from the coordinator. What it answers first is a
// timeout; the session's end waits for the verdict (the fence, exit 22) instead of reconnecting
// as a silent standby. The fault suite's woken instance under load showed it.
TEST(ExactlyOnceStalls, AnAbortThatTimesOutIsResumedUntilItNamesTheFence) {
  Harness h(exactly_once());
  h.script.hold = true;
  int aborts = 0;
  h.script.abort_result = [&aborts] {
    return ++aborts < 3 ? kafka::TxnResult{kafka::TxnStatus::retry, "_TIMED_OUT: Timed out"}
                        : kafka::TxnResult{kafka::TxnStatus::fenced, "_FENCED: fenced by a newer instance"};
  };
  h.stop_when_done = false;
  h.source.push(relation());
  h.txn(0x1000, 1);
  const auto outcome = h.run({[] {}, [&] { h.source.lose_connection(); }});
  ASSERT_EQ(outcome.kind, Outcome::Kind::fatal) << outcome.reason;
  EXPECT_EQ(outcome.cause, Fatal::fenced);
  EXPECT_EQ(aborts, 3);
  EXPECT_EQ(h.source.flush, Lsn{0x100}) << "nothing of the transaction is confirmed";
}

// The session ends while a commit that timed out waits to be resumed. librdkafka refuses an
// abort beside it (_CONFLICT, retriable), which the session's end used to log and reconnect on:
// the commit is resumed to its verdict instead.
TEST(ExactlyOnceStalls, ACommitThatTimedOutIsResumedToItsVerdictWhenTheSessionEnds) {
  Harness h(exactly_once());
  int commits = 0;
  h.script.commit_result = [&] {
    if (++commits == 1) {
      h.source.lose_connection();  // the replication connection is lost meanwhile
      return kafka::TxnResult{kafka::TxnStatus::retry, "_TIMED_OUT: Timed out"};
    }
    return kafka::TxnResult{kafka::TxnStatus::fenced, "_FENCED: fenced by a newer instance"};
  };
  h.script.abort_result = [] {
    return kafka::TxnResult{kafka::TxnStatus::retry,
                            "_CONFLICT: Conflicting commit_transaction API call is already "
                            "in progress"};
  };
  h.stop_when_done = false;
  h.source.push(relation());
  h.txn(0x1000, 1);
  const auto outcome = h.run();
  ASSERT_EQ(outcome.kind, Outcome::Kind::fatal) << outcome.reason;
  EXPECT_EQ(outcome.cause, Fatal::fenced);
  EXPECT_EQ(commits, 2);
  EXPECT_EQ(std::count(h.script.txn_calls.begin(), h.script.txn_calls.end(), "abort"), 0);
  EXPECT_TRUE(h.script.committed.empty());
  EXPECT_EQ(h.source.flush, Lsn{0x100});
}

// transaction.timeout.ms of 1,000 ms, and a commit the coordinator answers as after its abort
// (the producer's epoch is old); the session must end itself.
void coordinator_aborts_after_1000ms(Harness& h) {
  h.config.kafka.properties["transaction.timeout.ms"] = "1000";
  h.stop_when_done = false;
  h.script.commit_result = [] {
    return kafka::TxnResult{kafka::TxnStatus::abort,
                            "INVALID_PRODUCER_EPOCH: Producer attempted to produce with an old epoch"};
  };
}

// A Postgres transaction is published in one Kafka transaction; one that takes longer than the
// producer's transaction.timeout.ms is aborted by the coordinator in every session. The log named
// it an outage; it names the transaction's age, its records and the timeout, with the fix.
TEST(ExactlyOnceStalls, ATransactionThatOutlivesTransactionTimeoutIsNamedWithItsFigures) {
  Harness h(exactly_once());
  coordinator_aborts_after_1000ms(h);
  h.source.push(relation());
  // One Postgres transaction whose rows come over 1.2 s of the stream.
  std::vector<std::function<void()>> steps;
  steps.emplace_back([&] {
    h.source.push(begin(0x1000 - 8, 0x1000));
    h.source.pump();
  });
  for (int i = 1; i <= 1'200; ++i) {
    steps.emplace_back([&, i] {
      if (i % 100 == 0) {
        h.source.push(insert(i / 100));
        h.source.pump();
      }
    });
  }
  steps.emplace_back([&] {
    h.source.push(commit(0x1000 - 8, 0x1000), Lsn{0x1000});
    h.source.pump();
  });
  steps.emplace_back([&] { h.source.caught_up(); });
  const auto outcome = h.run(steps);
  ASSERT_EQ(outcome.kind, Outcome::Kind::reconnect) << outcome.reason;
  EXPECT_NE(outcome.reason.find("transaction.timeout.ms (1000 ms)"), std::string::npos) << outcome.reason;
  EXPECT_NE(outcome.reason.find("with 13 record(s)"), std::string::npos) << outcome.reason;
  EXPECT_NE(outcome.reason.find("transaction.max.timeout.ms"), std::string::npos) << outcome.reason;
  EXPECT_EQ(h.source.flush, Lsn{0x100});
}

// The same refusal of a young transaction is not blamed on the timeout.
TEST(ExactlyOnceStalls, AnAbortOfAYoungTransactionDoesNotNameTheTimeout) {
  Harness h(exactly_once());
  coordinator_aborts_after_1000ms(h);
  h.source.push(relation());
  h.txn(0x1000, 3);
  const auto outcome = h.run({[] {}, [&h] { h.source.caught_up(); }});
  ASSERT_EQ(outcome.kind, Outcome::Kind::reconnect) << outcome.reason;
  EXPECT_EQ(outcome.reason.find("transaction.timeout.ms"), std::string::npos) << outcome.reason;
}

}  // namespace
}  // namespace pgoutbox::relay
