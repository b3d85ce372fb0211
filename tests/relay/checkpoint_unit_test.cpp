// The checkpoint (docs/spec.md I10) without services: its record, when it is trusted, what the
// relay skips because of it, and the exactly-once commit cycle against a fake transactional sink.

#include <gtest/gtest.h>

#include <algorithm>

#include "pgoutbox/kafka/checkpoint.h"
#include "pgoutbox/relay/checkpoint_trust.h"
#include "relay_fakes.h"

namespace pgoutbox::relay {
namespace {

using namespace pgoutbox::relay::testing;
using namespace std::chrono_literals;

const kafka::SlotIdentity kSlot{"7000000000000000001", "shop", "pgoutbox"};

// A checkpoint this slot's relay wrote (the harness's transactional id in exactly-once mode).
kafka::Checkpoint at(std::uint64_t lsn, int timeline = 1, config::Delivery delivery = config::Delivery::at_least_once) {
  const bool eos = delivery == config::Delivery::exactly_once;
  return kafka::Checkpoint{.slot = kSlot,
                           .timeline = timeline,
                           .lsn = Lsn{lsn},
                           .delivery = eos ? "exactly-once" : "at-least-once",
                           .transactional_id = eos ? "pgoutbox-test" : "",
                           .mac = {},
                           .xid = static_cast<std::uint32_t>(lsn),  // the harness's transaction ending there
                           .commit_time = 0,
                           .version = kafka::kCheckpointVersion};
}

ResumeFacts facts_at(int timeline, std::uint64_t slot_confirmed, std::uint64_t server_position,
                     config::Delivery delivery = config::Delivery::at_least_once, std::string transactional_id = "",
                     bool signing = true) {
  return ResumeFacts{.identity = kSlot,
                     .timeline = timeline,
                     .slot_confirmed = Lsn{slot_confirmed},
                     .server_position = Lsn{server_position},
                     .delivery = delivery,
                     .transactional_id = std::move(transactional_id),
                     .checkpoint_topic = "pgoutbox.checkpoints",
                     .signing = signing};
}

TEST(Checkpoint, RecordRoundTripsAndIsKeyedBySlotIdentity) {
  auto c = at(0x16B374D848);
  c.slot.database = "sh\"op\n";
  c.delivery = "exactly-once";
  c.transactional_id = "pgoutbox-x";
  const auto record = kafka::checkpoint_record("pgoutbox.checkpoints", c);
  EXPECT_EQ(record.topic, "pgoutbox.checkpoints");
  EXPECT_EQ(record.key, "7000000000000000001/sh\"op\n/pgoutbox");
  const auto back = kafka::decode(record.value);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->lsn, c.lsn);
  EXPECT_EQ(back->slot.database, c.slot.database);
  EXPECT_EQ(back->timeline, 1);
  EXPECT_EQ(back->delivery, "exactly-once");
  EXPECT_EQ(back->transactional_id, "pgoutbox-x");
}

TEST(Checkpoint, AnythingButAVersionOneCheckpointIsNotOne) {
  for (const std::string bad :
       {"", "{}", "null", "{\"version\":2}", "[1]", "{\"version\":1,\"lsn\":\"0/10\"}",
        R"({"version":1,"system_id":"1","database":"d","slot":"s","timeline":1,"lsn":"zz",)"
        R"("delivery":"at-least-once","transactional_id":""})",
        // version 3 names its transaction; without it, it is none
        R"({"version":3,"system_id":"1","database":"d","slot":"s","timeline":1,"lsn":"0/10",)"
        R"("delivery":"at-least-once","transactional_id":"","mac":""})",
        R"({"version":4,"system_id":"1","database":"d","slot":"s","timeline":1,"lsn":"0/10",)"
        R"("delivery":"at-least-once","transactional_id":"","mac":"","xid":1,"commit_time":1})"}) {
    EXPECT_FALSE(kafka::decode(bad)) << bad;
  }
}

TEST(CheckpointTrust, SkipsOnlyOverTheSameHistory) {
  struct Case {
    const char* what;
    std::optional<kafka::Checkpoint> mine;
    int timeline;
    std::uint64_t slot_confirmed;
    std::uint64_t server_position;
    std::uint64_t skip_below;  // 0: nothing skipped
    bool warned;
  };
  const std::vector<Case> cases = {
      {"no checkpoint", std::nullopt, 1, 0x100, 0x9000, 0, false},
      {"ahead of the slot (a Postgres crash rewound it)", at(0x5000), 1, 0x100, 0x9000, 0x5000, false},
      {"behind the slot (a recreated slot starts later)", at(0x50), 1, 0x100, 0x9000, 0, false},
      {"equal to the slot", at(0x100), 1, 0x100, 0x9000, 0, false},
      {"another timeline (a promoted standby)", at(0x5000, 1), 2, 0x100, 0x9000, 0, true},
      {"ahead of the server's WAL (a restored backup)", at(0x9001), 1, 0x100, 0x9000, 0, true},
  };
  for (const auto& c : cases) {
    kafka::CheckpointScan scan;
    scan.mine = c.mine;
    const auto resume = trust_checkpoint(scan, facts_at(c.timeline, c.slot_confirmed, c.server_position));
    EXPECT_EQ(resume.skip_below, Lsn{c.skip_below}) << c.what;
    EXPECT_EQ(!resume.warnings.empty(), c.warned) << c.what;
    EXPECT_FALSE(resume.refused) << c.what;
  }
}

TEST(CheckpointTrust, AnotherSystemsCheckpointIsReportedAndASharedTransactionalIdRefused) {
  kafka::CheckpointScan scan;
  auto other = at(0x5000);
  other.slot.system_id = "7999";
  scan.other_systems.push_back(other);
  const auto facts = facts_at(1, 0x100, 0x9000, config::Delivery::exactly_once, "shared-id");
  auto resume = trust_checkpoint(scan, facts);
  ASSERT_EQ(resume.warnings.size(), 1U);
  EXPECT_NE(resume.warnings[0].find("7999"), std::string::npos) << resume.warnings[0];
  EXPECT_EQ(resume.skip_below, Lsn{});

  auto sharer = at(0x5000);
  sharer.slot.slot = "other_slot";
  sharer.transactional_id = "shared-id";
  scan.same_transactional_id.push_back(sharer);
  resume = trust_checkpoint(scan, facts);
  ASSERT_TRUE(resume.refused);
  EXPECT_EQ(resume.refused->cause, Fatal::kafka_config);
  EXPECT_NE(resume.refused->reason.find("kafka.transactional_id"), std::string::npos) << resume.refused->reason;
}

// At-least-once: transactions the checkpoint covers are not published again; the first one past
// it is; the slot is still confirmed over the skipped ones.
TEST(RelayCheckpoint, TransactionsBelowTheCheckpointAreSkipped) {
  Harness h;
  h.checkpoints = [] {
    kafka::CheckpointScan scan;
    scan.mine = at(0x2000);
    return scan;
  };
  h.source.push(relation());
  h.txn(0x1000, 2, 1);  // commit record at 0x0FF8 < 0x2000: in Kafka already
  h.txn(0x2000, 2, 3);  // ends at the checkpoint: in Kafka already
  h.txn(0x3000, 2, 5);  // past it
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  std::vector<std::string> ids;
  for (const auto& p : h.script.produced)
    if (p.record.topic != "pgoutbox.checkpoints") ids.push_back(p.record.event_id);
  EXPECT_EQ(ids,
            (std::vector<std::string>{"00000000-0000-0000-0000-000000000005", "00000000-0000-0000-0000-000000000006"}));
  EXPECT_EQ(h.counters.checkpoint_skipped_transactions, 2U);
  EXPECT_EQ(h.counters.checkpoint_skipped_rows, 4U);
  EXPECT_EQ(h.source.flush, Lsn{0x3000});
}

// At-least-once: the checkpoint written is the confirmed position, only after the acks it
// covers, and once more at a graceful stop.
TEST(RelayCheckpoint, TheCheckpointFollowsTheAcknowledgedPositionAndIsWrittenAtStop) {
  Harness h;
  h.config.checkpoint.interval = 5ms;
  h.checkpoints = [] { return kafka::CheckpointScan{}; };
  h.script.hold = true;
  h.source.push(relation());
  h.txn(0x1000, 2, 1);
  std::vector<std::function<void()>> steps(20, [] {});
  steps[10] = [&] {
    // Nothing acknowledged yet: no checkpoint may claim the transaction.
    for (const auto& p : h.script.produced) EXPECT_NE(p.record.topic, "pgoutbox.checkpoints");
    h.script.hold = false;
    h.script.release_all();
  };
  const auto outcome = h.run(steps);
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  std::vector<Lsn> written;
  for (const auto& r : h.script.landed) {
    if (r.topic != "pgoutbox.checkpoints") continue;
    const auto c = kafka::decode(r.value);
    ASSERT_TRUE(c);
    EXPECT_EQ(r.key, kSlot.key());
    written.push_back(c->lsn);
  }
  ASSERT_FALSE(written.empty());
  EXPECT_EQ(written.back(), Lsn{0x1000});
  EXPECT_GE(h.counters.checkpoints_written, 1U);
}

config::Config exactly_once() {
  auto c = test_config();
  c.delivery = config::Delivery::exactly_once;
  c.kafka.transaction_interval = 50ms;
  return c;
}

std::vector<std::string> ids_of(const std::vector<outbox::Record>& records, bool checkpoints = false) {
  std::vector<std::string> out;
  for (const auto& r : records)
    if ((r.topic == "pgoutbox.checkpoints") == checkpoints) out.push_back(checkpoints ? r.value : r.event_id);
  return out;
}

// Exactly-once: records are confirmed only by their Kafka transaction's commit, which also
// holds the checkpoint at the end of the Postgres transactions it covers.
TEST(RelayExactlyOnce, ACommitConfirmsWholeTransactionsWithTheirCheckpoint) {
  Harness h(exactly_once());
  h.checkpoints = [] { return kafka::CheckpointScan{}; };
  h.source.push(relation());
  h.txn(0x1000, 3, 1);
  h.txn(0x2000, 2, 4);
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  ASSERT_GE(h.script.txn_calls.size(), 3U);
  EXPECT_EQ(h.script.txn_calls[0], "init");
  EXPECT_EQ(ids_of(h.script.committed).size(), 5U);
  const auto checkpoints = ids_of(h.script.committed, true);
  ASSERT_FALSE(checkpoints.empty());
  EXPECT_EQ(kafka::decode(checkpoints.back())->lsn, Lsn{0x2000});
  EXPECT_EQ(kafka::decode(checkpoints.back())->delivery, "exactly-once");
  EXPECT_EQ(h.source.flush, Lsn{0x2000});
  EXPECT_EQ(h.counters.records_acked, 5U);
  EXPECT_TRUE(h.script.open_txn.empty());
  EXPECT_EQ(h.script.txn_calls_inside_a_report, 0);
}

// Issue 37 item 4: a backfill's relay (SessionStart::write_checkpoints false) commits its Kafka
// transactions without a checkpoint: its chunks are transactions at positions of its own (2n+1,
// 2n+2, xid 0) that no checkpoint may name (docs/spec.md I11). Before, each commit wrote a
// signed checkpoint of the chunk's synthetic position under the slot's key.
TEST(RelayExactlyOnce, ABackfillWritesNoCheckpoint) {
  Harness h(exactly_once());
  h.checkpoints = [] { return kafka::CheckpointScan{}; };
  h.write_checkpoints = false;
  h.source.push(relation());
  h.txn(0x1000, 3, 1);
  h.txn(0x2000, 2, 4);
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  EXPECT_EQ(ids_of(h.script.committed).size(), 5U);
  EXPECT_TRUE(ids_of(h.script.committed, true).empty()) << "a checkpoint was written by a backfill";
  EXPECT_EQ(h.counters.checkpoints_written, 0U);
  EXPECT_EQ(h.source.flush, Lsn{0x2000});
}

// Reports held back, as a broker answers them later: the commit waits for them, and is never
// called from inside a report's callback (librdkafka's flush would wait there for its timeout).
TEST(RelayExactlyOnce, TheCommitWaitsForTheReportsAndIsNotCalledFromOne) {
  Harness h(exactly_once());
  h.script.hold = true;
  h.source.push(relation());
  h.txn(0x1000, 3, 1);
  std::vector<std::function<void()>> steps(10, [] {});
  steps[5] = [&] {
    EXPECT_TRUE(h.script.committed.empty()) << "committed before its records were reported";
    h.script.hold = false;
    h.script.release_all();
  };
  const auto outcome = h.run(steps);
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  EXPECT_EQ(ids_of(h.script.committed).size(), 3U);
  EXPECT_EQ(h.script.txn_calls_inside_a_report, 0);
  EXPECT_EQ(h.source.flush, Lsn{0x1000});
}

// An aborted transaction (a refused record's report) is not aborted from inside that report, nor
// the transactions that publish it again (poison.policy stop ends them).
TEST(RelayExactlyOnce, AnAbortIsNotCalledFromInsideAReport) {
  Harness h(exactly_once());
  h.script.verdict = [](const Produced& p) -> std::optional<kafka::DeliveryError> {
    if (p.record.event_id == "00000000-0000-0000-0000-000000000001") return refused_for_size();
    return std::nullopt;
  };
  h.source.push(relation());
  h.txn(0x1000, 2, 1);
  h.stop_when_done = false;  // the session ends itself
  h.at_once_restarts = 0;
  const auto outcome = h.run();
  ASSERT_EQ(outcome.kind, Outcome::Kind::fatal) << outcome.reason;
  EXPECT_EQ(outcome.cause, Fatal::poison);
  EXPECT_GE(std::count(h.script.txn_calls.begin(), h.script.txn_calls.end(), "abort"), 2);
  EXPECT_EQ(h.script.txn_calls_inside_a_report, 0);
  EXPECT_TRUE(h.script.committed.empty());
}

// A Postgres transaction is never split across Kafka transactions, and nothing is confirmed
// before the commit: a failed commit confirms nothing and ends the session.
TEST(RelayExactlyOnce, AnAbortedCommitConfirmsNothingAndEndsTheSession) {
  Harness h(exactly_once());
  h.script.commit_result = [] { return kafka::TxnResult{kafka::TxnStatus::abort, "TRANSACTION_ABORTED"}; };
  h.source.push(relation());
  h.txn(0x1000, 3, 1);
  h.stop_when_done = false;  // the session ends itself
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::reconnect) << outcome.reason;
  EXPECT_TRUE(h.script.committed.empty());
  EXPECT_EQ(h.source.flush, Lsn{0x100});
  EXPECT_NE(std::find(h.script.txn_calls.begin(), h.script.txn_calls.end(), "abort"), h.script.txn_calls.end());
}

// Issue 26: the coordinator answers a commit before it has written the commit's markers and
// refuses the same transactional id's next transaction until it has (librdkafka retries after
// 20 ms, 15% of the transactions at 1,000 events/s). Two producers take turns; each one's
// previous transaction ended a whole transaction ago. Both ids are initialised, with the option
// or without, so both of an older instance are fenced.
TEST(RelayExactlyOnce, KafkaTransactionsAlternateBetweenTwoProducers) {
  for (const bool alternate : {true, false}) {
    auto config = exactly_once();
    config.kafka.alternate_producers = alternate;
    Harness h(config);
    h.source.push(relation());
    h.txn(0x1000, 1, 1);
    const auto next = [&h](std::uint64_t end, int first) {
      return [&h, end, first] {
        h.txn(end, 1, first);
        h.source.pump();
      };
    };
    h.run({[] {}, [&h] { h.source.caught_up(); }, next(0x2000, 2), [&h] { h.source.caught_up(); }, next(0x3000, 3),
           [&h] { h.source.caught_up(); }});
    EXPECT_EQ(h.source.flush, Lsn{0x3000});
    EXPECT_EQ(h.script.committed.size(), 3u + 3u) << "three records and three checkpoints";
    // Both ids are initialised whichever the option, so an older instance configured otherwise
    // is fenced on both (issue 37 item 2).
    EXPECT_EQ(std::count(h.script.txn_calls.begin(), h.script.txn_calls.end(), "init"), 2);
    const std::vector<std::string> expected =
        alternate ? std::vector<std::string>{"pgoutbox-test", "pgoutbox-test-alt", "pgoutbox-test"}
                  : std::vector<std::string>{"pgoutbox-test", "pgoutbox-test", "pgoutbox-test"};
    EXPECT_EQ(h.script.commit_ids, expected) << "alternate_producers " << alternate;
  }
}

TEST(RelayExactlyOnce, AFencedProducerExitsWithItsOwnCode) {
  Harness h(exactly_once());
  h.script.commit_result = [] { return kafka::TxnResult{kafka::TxnStatus::fenced, "PRODUCER_FENCED"}; };
  h.source.push(relation());
  h.txn(0x1000, 1, 1);
  h.stop_when_done = false;  // the session ends itself
  const auto outcome = h.run();
  ASSERT_EQ(outcome.kind, Outcome::Kind::fatal) << outcome.reason;
  EXPECT_EQ(outcome.cause, Fatal::fenced);
  EXPECT_EQ(h.source.flush, Lsn{0x100});
}

// A record Kafka refuses aborts its transaction, which is published again in the same session,
// the record remembered; after poison.max_retries refusals the policy applies: dead-letter writes
// it in the transaction. Its first refusal came with its batch, so it is first sent alone, and
// only refusals alone count: 1 + 3 aborts, one session, the others committed once.
TEST(RelayExactlyOnce, ARefusedRecordIsRetriedThenDeadLetteredInTheSameSession) {
  auto config = exactly_once();
  config.poison.max_retries = 2;
  config.poison.policy = config::PoisonPolicy::dead_letter;
  Harness h(config);
  h.script.verdict = [](const Produced& p) -> std::optional<kafka::DeliveryError> {
    if (p.record.event_id == "00000000-0000-0000-0000-000000000002" && p.record.topic != "dlq")
      return refused_for_size();
    return std::nullopt;
  };
  h.source.push(relation());
  h.txn(0x1000, 3, 1);
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  EXPECT_EQ(h.sessions, 1);
  EXPECT_EQ(std::count(h.script.txn_calls.begin(), h.script.txn_calls.end(), "abort"), 4);
  ASSERT_EQ(h.refused->size(), 1U);
  EXPECT_EQ(h.refused->begin()->second.attempts, 3U);
  const auto ids = ids_of(h.script.committed);
  ASSERT_EQ(ids.size(), 3U);
  EXPECT_EQ(h.script.committed[1].topic, "dlq");
  EXPECT_EQ(h.source.flush, Lsn{0x1000});
}

// Exactly-once with the checkpoint: what an earlier session committed is skipped.
TEST(RelayExactlyOnce, WhatTheCheckpointSaysIsCommittedIsSkipped) {
  Harness h(exactly_once());
  h.checkpoints = [] {
    kafka::CheckpointScan scan;
    scan.mine = at(0x1000, 1, config::Delivery::exactly_once);
    return scan;
  };
  h.source.push(relation());
  h.txn(0x1000, 3, 1);
  h.txn(0x2000, 1, 4);
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  EXPECT_EQ(ids_of(h.script.committed), (std::vector<std::string>{"00000000-0000-0000-0000-000000000004"}));
  EXPECT_EQ(h.source.flush, Lsn{0x2000});
}

}  // namespace
}  // namespace pgoutbox::relay
