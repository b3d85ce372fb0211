#include "pgoutbox/relay/confirm_tracker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace pgoutbox::relay {
namespace {

TEST(ConfirmTracker, ConfirmsATransactionOnlyWhenAllItsRecordsAreAcked) {
  ConfirmTracker t;
  const auto a = t.begin();
  t.add_record(a);
  t.add_record(a);
  t.commit(a, Lsn{100});
  EXPECT_EQ(t.durable(), Lsn{0});
  t.ack(a);
  EXPECT_EQ(t.durable(), Lsn{0});
  t.ack(a);
  EXPECT_EQ(t.durable(), Lsn{100});
  EXPECT_TRUE(t.idle());
}

TEST(ConfirmTracker, AcksOfLaterTransactionsWaitForEarlierOnes) {
  ConfirmTracker t;
  const auto a = t.begin();
  t.add_record(a);
  t.commit(a, Lsn{100});
  const auto b = t.begin();
  t.add_record(b);
  t.commit(b, Lsn{200});
  const auto c = t.begin();
  t.add_record(c);
  t.commit(c, Lsn{300});
  t.ack(c);
  t.ack(b);
  EXPECT_EQ(t.durable(), Lsn{0}) << "confirmed past an unacknowledged transaction (I2)";
  t.ack(a);
  EXPECT_EQ(t.durable(), Lsn{300});
}

TEST(ConfirmTracker, AnAckedButUncommittedTransactionIsNotConfirmed) {
  ConfirmTracker t;
  const auto a = t.begin();
  t.add_record(a);
  t.ack(a);
  EXPECT_EQ(t.durable(), Lsn{0});
  t.idle_position(Lsn{500});
  EXPECT_EQ(t.durable(), Lsn{0}) << "keepalive confirmed while a transaction was half received";
  t.commit(a, Lsn{100});
  EXPECT_EQ(t.durable(), Lsn{100});
}

TEST(ConfirmTracker, TransactionsWithoutRecordsConfirmInOrder) {
  ConfirmTracker t;
  const auto a = t.begin();
  t.add_record(a);
  t.commit(a, Lsn{100});
  const auto b = t.begin();
  t.commit(b, Lsn{200});  // e.g. only rows of tables that are not mapped
  EXPECT_EQ(t.durable(), Lsn{0});
  t.ack(a);
  EXPECT_EQ(t.durable(), Lsn{200});
}

TEST(ConfirmTracker, KeepaliveIsConfirmedOnlyWhenNothingIsInFlight) {
  ConfirmTracker t;
  t.idle_position(Lsn{50});
  EXPECT_EQ(t.durable(), Lsn{50});
  const auto a = t.begin();
  t.add_record(a);
  t.commit(a, Lsn{100});
  t.idle_position(Lsn{400});
  EXPECT_EQ(t.durable(), Lsn{50});
  t.ack(a);
  EXPECT_EQ(t.durable(), Lsn{400}) << "the keepalive received while the ack was pending applies once it drains";
  t.idle_position(Lsn{300});
  EXPECT_EQ(t.durable(), Lsn{400}) << "durable went backwards";
}

TEST(ConfirmTracker, AKeepaliveDuringPendingAcksWaitsForLaterTransactionsToo) {
  ConfirmTracker t;
  const auto a = t.begin();
  t.add_record(a);
  t.commit(a, Lsn{100});
  t.idle_position(Lsn{150});
  const auto b = t.begin();
  t.add_record(b);
  t.commit(b, Lsn{300});
  t.ack(a);
  EXPECT_EQ(t.durable(), Lsn{100}) << "confirmed past transaction b, which is not acknowledged (I2)";
  t.ack(b);
  EXPECT_EQ(t.durable(), Lsn{300});
}

TEST(ConfirmTracker, EmptyCommitsFoldIntoTheirPredecessorAndKeepTheNewestEnd) {
  ConfirmTracker t;
  const auto a = t.begin();
  t.add_record(a);
  t.commit(a, Lsn{100});
  for (std::uint64_t i = 1; i <= 3; ++i) t.commit(t.begin(), Lsn{100 + i * 10});
  EXPECT_EQ(t.pending_transactions(), 1U);
  EXPECT_EQ(t.durable(), Lsn{0});
  const auto d = t.begin();  // a later transaction with a record: its own entry, its own id
  t.add_record(d);
  t.commit(d, Lsn{500});
  EXPECT_EQ(t.pending_transactions(), 2U);
  t.ack(a);
  EXPECT_EQ(t.durable(), Lsn{130}) << "the folded empty commits confirm with their predecessor";
  t.ack(d);
  EXPECT_EQ(t.durable(), Lsn{500});
  EXPECT_TRUE(t.idle());
}

TEST(ConfirmTracker, HundredThousandEmptyCommitsBehindOneUnackedRecordStayBounded) {
  ConfirmTracker t;
  const auto a = t.begin();
  t.add_record(a);
  t.commit(a, Lsn{1000});
  std::size_t most = 0;
  for (std::uint64_t i = 1; i <= 100'000; ++i) {
    const auto e = t.begin();
    most = std::max(most, t.pending_transactions());
    t.commit(e, Lsn{1000 + i});
    most = std::max(most, t.pending_transactions());
  }
  EXPECT_LE(most, 2U) << "empty transactions pile up behind the unacknowledged record (I6)";
  EXPECT_EQ(t.durable(), Lsn{0});
  t.ack(a);
  EXPECT_EQ(t.durable(), Lsn{101'000});
}

TEST(ConfirmTracker, MisuseIsABugNotSilence) {
  ConfirmTracker t;
  const auto a = t.begin();
  EXPECT_THROW(t.begin(), std::logic_error);
  EXPECT_THROW(t.ack(a), std::logic_error);
  EXPECT_THROW(t.commit(a + 1, Lsn{1}), std::logic_error);
  t.commit(a, Lsn{10});
  EXPECT_THROW(t.ack(a), std::logic_error);  // already confirmed and gone
}

// Random interleavings: the durable position always equals the end of the longest fully
// acknowledged prefix of committed transactions.
TEST(ConfirmTracker, RandomAckOrdersNeverConfirmPastAHole) {
  std::mt19937 rng(12345);
  for (int round = 0; round < 200; ++round) {
    ConfirmTracker t;
    struct Sent {
      ConfirmTracker::TxnId txn;
      int index;
    };
    std::vector<Sent> unacked;
    std::vector<int> remaining;
    std::vector<Lsn> ends;
    const int txns = 1 + static_cast<int>(rng() % 20);
    for (int i = 0; i < txns; ++i) {
      const auto id = t.begin();
      const int records = static_cast<int>(rng() % 4);
      for (int r = 0; r < records; ++r) {
        t.add_record(id);
        unacked.push_back({id, i});
      }
      remaining.push_back(records);
      ends.push_back(Lsn{static_cast<std::uint64_t>(100 * (i + 1))});
      t.commit(id, ends.back());
    }
    std::shuffle(unacked.begin(), unacked.end(), rng);
    for (const auto& s : unacked) {
      t.ack(s.txn);
      --remaining[static_cast<std::size_t>(s.index)];
      Lsn expected{0};
      for (std::size_t i = 0; i < remaining.size() && remaining[i] == 0; ++i) expected = ends[i];
      ASSERT_EQ(t.durable(), expected);
    }
    EXPECT_EQ(t.durable(), ends.back());
    EXPECT_EQ(t.outstanding_records(), 0U);
  }
}

// What a checkpoint covers (docs/spec.md I11): the newest transaction at or below the confirmed
// position, also when empty transactions were folded into one that waited for Kafka, never a
// keepalive's position; and the messages after it, which it never names (issue 37 item 3).
TEST(ConfirmTracker, TheDurableCoverageNamesTheNewestConfirmedTransactionNotAKeepaliveNorAMessage) {
  ConfirmTracker t;
  const TransactionMark a{10, 100, Lsn{0x100}}, b{11, 110, Lsn{0x200}}, c{12, 120, Lsn{0xA00}};
  const auto ta = t.begin();
  t.add_record(ta);
  t.commit(ta, a.end_lsn, a);
  const auto tb = t.begin();  // empty: folded into a, which waits for Kafka
  t.commit(tb, b.end_lsn, b);
  EXPECT_TRUE(t.durable_coverage().empty());
  EXPECT_EQ(t.newest_coverage(), (Coverage{b, {}}));
  t.ack(ta);
  EXPECT_EQ(t.durable(), Lsn{0x200});
  EXPECT_EQ(t.durable_coverage(), (Coverage{b, {}}));
  t.idle_position(Lsn{0x900});
  EXPECT_EQ(t.durable(), Lsn{0x900});
  EXPECT_EQ(t.durable_coverage(), (Coverage{b, {}}));
  const auto chunk = t.begin();  // a unit that is neither (a backfill chunk) covers nothing
  t.commit(chunk, Lsn{0x940});
  EXPECT_EQ(t.durable_coverage(), (Coverage{b, {}}));
  const auto message = t.begin();  // a message is covered after b, not named
  t.add_record(message);
  t.commit_message(message, Lsn{0x950});
  EXPECT_EQ(t.newest_coverage(), (Coverage{b, Lsn{0x950}}));
  EXPECT_EQ(t.durable_coverage(), (Coverage{b, {}}));
  t.ack(message);
  EXPECT_EQ(t.durable_coverage(), (Coverage{b, Lsn{0x950}}));
  const auto tc = t.begin();
  t.commit(tc, c.end_lsn, c);
  EXPECT_EQ(t.durable_coverage(), (Coverage{c, {}}));
}

// A session goes on from what the checkpoint it resumed from covers: a message first extends it.
TEST(ConfirmTracker, ASessionsCoverageGoesOnFromTheCheckpointItResumedFrom) {
  ConfirmTracker t;
  const TransactionMark a{10, 100, Lsn{0x100}};
  t.resume_from(Coverage{a, Lsn{0x180}});
  const auto message = t.begin();
  t.commit_message(message, Lsn{0x200});
  EXPECT_EQ(t.durable_coverage(), (Coverage{a, Lsn{0x200}}));
}

// The stage histograms' source (stage_times.h): a transaction's times come out once, when it
// becomes confirmable, in commit order; the last send and the last ack are the ones kept.
TEST(ConfirmTracker, StageTimesComeOutOnceWhenATransactionBecomesConfirmable) {
  ConfirmTracker t;
  const auto a = t.begin(1'000, Lsn{10}, 1'400, 1'300);
  t.add_record(a);
  t.add_record(a);
  t.sent(a, 1'500);
  t.sent(a, 1'600);
  t.commit(a, Lsn{100});
  const auto b = t.begin(2'000, Lsn{110}, 2'100);
  t.add_record(b);
  t.sent(b, 2'200);
  t.commit(b, Lsn{200});
  t.ack(b, 2'900);
  t.ack(a, 3'000);
  EXPECT_TRUE(t.take_confirmed_times().empty()) << "a is still waiting for one record";
  t.ack(a, 3'500);
  const auto times = t.take_confirmed_times();
  ASSERT_EQ(times.size(), 2U);
  EXPECT_EQ(times[0].commit_us, 1'000);
  EXPECT_EQ(times[0].server_sent_us, 1'300);
  EXPECT_EQ(times[0].received_us, 1'400);
  EXPECT_EQ(times[0].sent_us, 1'600);
  EXPECT_EQ(times[0].acked_us, 3'500);
  EXPECT_EQ(times[1].commit_us, 2'000);
  EXPECT_EQ(times[1].server_sent_us, 0) << "not given";
  EXPECT_EQ(times[1].acked_us, 2'900);
  EXPECT_TRUE(t.take_confirmed_times().empty()) << "taken twice";
}

TEST(ConfirmTracker, TransactionsWithoutRecordsGiveNoStageTimesAndTheKeptOnesAreBounded) {
  ConfirmTracker t;
  const auto empty = t.begin(1, Lsn{1}, 2);
  t.commit(empty, Lsn{5});
  EXPECT_TRUE(t.take_confirmed_times().empty());
  // Nobody reads them: at most kKeptTimes are kept.
  for (std::uint64_t i = 0; i < ConfirmTracker::kKeptTimes + 10; ++i) {
    const auto id = t.begin(1, Lsn{10 + i * 10}, 2);
    t.add_record(id);
    t.commit(id, Lsn{15 + i * 10});
    t.ack(id, 3);
  }
  EXPECT_EQ(t.take_confirmed_times().size(), ConfirmTracker::kKeptTimes);
}

}  // namespace
}  // namespace pgoutbox::relay
