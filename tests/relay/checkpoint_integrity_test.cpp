// Nobody but pgoutbox makes it skip (docs/spec.md I11), without services: the checkpoint's
// signature, which records of the checkpoint topic the reader keeps, when a kept one decides
// what to skip, and that no row routes itself into a reserved topic. The same attacks against
// the real binary, Postgres and Kafka are in tests/security/checkpoint_forgery_test.cpp.

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <regex>

#include "pgoutbox/config/topic_template.h"
#include "pgoutbox/config/transactional_id.h"
#include "pgoutbox/kafka/checkpoint.h"
#include "pgoutbox/relay/checkpoint_trust.h"
#include "relay_fakes.h"

namespace pgoutbox::relay {
namespace {

using namespace pgoutbox::relay::testing;

const kafka::SlotIdentity kSlot{"7000000000000000001", "shop", "pgoutbox"};
const kafka::CheckpointKey kKey{std::string(kTestSigningKey)};

kafka::Checkpoint checkpoint_at(std::uint64_t lsn) {
  return kafka::Checkpoint{.slot = kSlot,
                           .timeline = 1,
                           .lsn = Lsn{lsn},
                           .delivery = "at-least-once",
                           .transactional_id = "",
                           .mac = {},
                           .xid = static_cast<std::uint32_t>(lsn),  // the harness's transaction ending there
                           .commit_time = 0,
                           .version = kafka::kCheckpointVersion};
}

kafka::Checkpoint signed_at(std::uint64_t lsn, const kafka::CheckpointKey& key = kKey) {
  auto c = checkpoint_at(lsn);
  key.sign(c);
  return c;
}

// One record of the topic, as the reader sees it.
void feed(kafka::CheckpointScan& scan, const std::string& record_key, const std::string& value,
          const kafka::CheckpointKey* key = &kKey, std::int64_t offset = 0) {
  kafka::scan_record(scan, kSlot, "", key, record_key, std::string_view(value), 0, offset);
}

ResumeFacts facts(bool signing = true) {
  return ResumeFacts{.identity = kSlot,
                     .timeline = 1,
                     .slot_confirmed = Lsn{0x100},
                     .server_position = Lsn{0x9000},
                     .delivery = config::Delivery::at_least_once,
                     .transactional_id = "",
                     .checkpoint_topic = "pgoutbox.checkpoints",
                     .signing = signing};
}

TEST(CheckpointSignature, VerifiesOnlyTheFieldsItSignedWithItsKey) {
  const auto c = signed_at(0x5000);
  EXPECT_EQ(c.mac.size(), 64U);
  EXPECT_TRUE(kKey.verifies(c));
  const auto back = kafka::decode(kafka::encode(c));
  ASSERT_TRUE(back);
  EXPECT_TRUE(kKey.verifies(*back));

  const kafka::CheckpointKey other{std::string(40, 'x')};
  EXPECT_FALSE(other.verifies(c));
  for (const auto& change : std::vector<std::function<void(kafka::Checkpoint&)>>{
           [](auto& x) { x.lsn = Lsn{0x5001}; }, [](auto& x) { x.timeline = 2; },
           [](auto& x) { x.slot.slot = "other"; }, [](auto& x) { x.slot.system_id = "1"; },
           [](auto& x) { x.delivery = "exactly-once"; }, [](auto& x) { x.transactional_id = "t"; },
           [](auto& x) { x.xid = 1; }, [](auto& x) { x.commit_time = 1; }, [](auto& x) { x.version = 2; },
           [](auto& x) { x.mac[0] = x.mac[0] == 'a' ? 'b' : 'a'; }, [](auto& x) { x.mac.clear(); }}) {
    auto changed = c;
    change(changed);
    EXPECT_FALSE(kKey.verifies(changed)) << kafka::encode(changed);
  }
}

TEST(CheckpointSignature, AShortKeyIsRefused) {
  EXPECT_THROW(kafka::CheckpointKey(std::string(31, 'k')), std::invalid_argument);
  EXPECT_NO_THROW(kafka::CheckpointKey(std::string(32, 'k')));
}

TEST(CheckpointScan, AForgedRecordUnderTheSlotsKeyIsRefusedAndTheGenuineOneKept) {
  kafka::CheckpointScan scan;
  feed(scan, kSlot.key(), kafka::encode(signed_at(0x2000)), &kKey, 10);
  // What any client with write access to the topic can write: the right key, valid JSON, far ahead.
  feed(scan, kSlot.key(), kafka::encode(checkpoint_at(0x8000)), &kKey, 11);
  feed(scan, kSlot.key(), kafka::encode(signed_at(0x8000, kafka::CheckpointKey(std::string(40, 'z')))), &kKey, 12);
  feed(scan, kSlot.key(), "{\"lsn\": \"0/8000\"}", &kKey, 13);
  ASSERT_TRUE(scan.mine);
  EXPECT_EQ(scan.mine->lsn, Lsn{0x2000});
  EXPECT_EQ(scan.refused_count, 3U);
  ASSERT_EQ(scan.refused.size(), 3U);
  EXPECT_EQ(scan.refused[0].offset, 11);
  EXPECT_NE(scan.refused[0].reason.find("not signed"), std::string::npos) << scan.refused[0].reason;
  EXPECT_NE(scan.refused[1].reason.find("does not verify"), std::string::npos) << scan.refused[1].reason;
  EXPECT_NE(scan.refused[2].reason.find("not a checkpoint"), std::string::npos) << scan.refused[2].reason;

  const auto resume = trust_checkpoint(scan, facts());
  EXPECT_EQ(resume.skip_below, Lsn{0x2000});
  EXPECT_EQ(resume.refused_records, 3U);
  ASSERT_EQ(resume.warnings.size(), 3U);
  EXPECT_NE(resume.warnings[0].find("partition 0 offset 11"), std::string::npos) << resume.warnings[0];
}

// A tombstone under the slot's key (issue 38 item 1): pgoutbox never writes one, so it is
// counted and named with its partition and offset, and the checkpoint before it stays the
// newest. Once compaction has deleted that checkpoint, exactly-once refuses to start for a slot
// that existed before (exit 25, as for a lost topic) unless the operator accepts it.
TEST(CheckpointScan, ATombstoneIsCountedAndNamedAndOnceAloneStopsExactlyOnceUnlessAccepted) {
  kafka::CheckpointScan scan;
  feed(scan, kSlot.key(), kafka::encode(signed_at(0x2000)), &kKey, 10);
  kafka::scan_record(scan, kSlot, "", &kKey, kSlot.key(), std::nullopt, 0, 11);
  kafka::scan_record(scan, kSlot, "", &kKey, "7000000000000000001/shop/other_slot", std::nullopt, 0, 12);
  ASSERT_TRUE(scan.mine) << "the tombstone erased the checkpoint before it";
  EXPECT_EQ(scan.mine->lsn, Lsn{0x2000});
  EXPECT_EQ(scan.refused_count, 1U) << "another slot's tombstone is not this slot's business";
  const auto kept = trust_checkpoint(scan, facts());
  EXPECT_EQ(kept.refused_records, 1U);
  ASSERT_EQ(kept.warnings.size(), 1U);
  EXPECT_NE(kept.warnings[0].find("partition 0 offset 11"), std::string::npos) << kept.warnings[0];
  EXPECT_NE(kept.warnings[0].find("tombstone"), std::string::npos) << kept.warnings[0];

  // Compaction ran: only the tombstone is left.
  kafka::CheckpointScan compacted;
  kafka::scan_record(compacted, kSlot, "", &kKey, kSlot.key(), std::nullopt, 0, 11);
  auto eos = facts();
  eos.delivery = config::Delivery::exactly_once;
  const auto refused = trust_checkpoint(compacted, eos);
  ASSERT_TRUE(refused.refused);
  EXPECT_EQ(exit_code(refused.refused->cause), 25);
  EXPECT_NE(refused.refused->reason.find("partition 0 offset 11"), std::string::npos) << refused.refused->reason;
  EXPECT_NE(refused.refused->reason.find("--accept-lost-checkpoint"), std::string::npos) << refused.refused->reason;
  auto accepted = eos;
  accepted.accept_lost_checkpoint = true;
  EXPECT_FALSE(trust_checkpoint(compacted, accepted).refused);
  auto created = eos;
  created.slot_created = true;
  EXPECT_FALSE(trust_checkpoint(compacted, created).refused) << "a slot created now has nothing to lose";
  const auto at_least_once = trust_checkpoint(compacted, facts());
  EXPECT_FALSE(at_least_once.refused);
  EXPECT_EQ(at_least_once.refused_records, 1U);
}

// The largest checkpoint pgoutbox can write (a 63-byte database name and an explicit
// transactional id at its limit, every byte of both escaped in JSON) stays under the size above
// which the reader refuses a record without decoding it (issue 38 item 2).
TEST(CheckpointScan, TheLargestCheckpointPgoutboxCanWriteIsRead) {
  auto c = checkpoint_at(0x2000);
  c.slot.database = std::string(63, '\x01');
  c.slot.slot = std::string(63, 's');
  c.delivery = "exactly-once";
  c.transactional_id = std::string(config::kMaxTransactionalIdBytes, '\x02');
  c.messages_end = Lsn{0xFFFFFFFFFFFFFFFFULL};
  kKey.sign(c);
  const auto value = kafka::encode(c);
  EXPECT_LT(value.size(), kafka::kMaxCheckpointBytes);
  const kafka::SlotIdentity identity = c.slot;
  kafka::CheckpointScan scan;
  kafka::scan_record(scan, identity, c.transactional_id, &kKey, identity.key(), std::string_view(value), 0, 0);
  EXPECT_EQ(scan.refused_count, 0U);
  EXPECT_TRUE(scan.mine);
}

TEST(CheckpointScan, AValueMustNameTheSlotItIsFiledUnder) {
  kafka::CheckpointScan scan;
  auto elsewhere = checkpoint_at(0x8000);
  elsewhere.slot.slot = "other_slot";
  kKey.sign(elsewhere);  // even a genuine checkpoint of another slot
  feed(scan, kSlot.key(), kafka::encode(elsewhere));
  EXPECT_FALSE(scan.mine);
  ASSERT_EQ(scan.refused.size(), 1U);
  EXPECT_NE(scan.refused[0].reason.find("not the key it is filed under"), std::string::npos);

  // Filed under another slot's key while naming this one: not this slot's, and not evidence of
  // a transactional id shared with another slot either.
  kafka::CheckpointScan other;
  kafka::scan_record(other, kSlot, "shared", &kKey, "7000000000000000001/shop/other_slot",
                     kafka::encode(signed_at(0x8000)), 0, 0);
  EXPECT_FALSE(other.mine);
  EXPECT_TRUE(other.same_transactional_id.empty());
  EXPECT_EQ(other.refused_count, 0U);  // not under this slot's key: not counted as this slot's
}

TEST(CheckpointScan, AForgedRecordNamingAnotherSlotCannotStopExactlyOnce) {
  // Exactly-once refuses to start when another slot's checkpoint carries its transactional id:
  // only a signed record may say so, or any writer of the topic could keep pgoutbox down.
  auto forged = checkpoint_at(0x8000);
  forged.slot.slot = "other_slot";
  forged.delivery = "exactly-once";
  forged.transactional_id = "pgoutbox-7000000000000000001-shop-pgoutbox";
  kafka::CheckpointScan scan;
  kafka::scan_record(scan, kSlot, forged.transactional_id, &kKey, forged.slot.key(), kafka::encode(forged), 0, 0);
  EXPECT_TRUE(scan.same_transactional_id.empty());
  kKey.sign(forged);
  kafka::scan_record(scan, kSlot, forged.transactional_id, &kKey, forged.slot.key(), kafka::encode(forged), 0, 1);
  EXPECT_EQ(scan.same_transactional_id.size(), 1U);
}

TEST(CheckpointTrust, WithoutASigningKeyNothingIsSkipped) {
  // No key configured: the reader keeps unsigned records, and none of them decides anything.
  kafka::CheckpointScan scan;
  feed(scan, kSlot.key(), kafka::encode(checkpoint_at(0x8000)), nullptr);
  ASSERT_TRUE(scan.mine);
  const auto resume = trust_checkpoint(scan, facts(false));
  EXPECT_EQ(resume.skip_below, Lsn{});
  EXPECT_NE(resume.note.find("not signed"), std::string::npos) << resume.note;
}

// A topic that cannot keep the checkpoint (a delete policy, several partitions) stops exactly-once
// before it relies on it, and is a warning in at-least-once, which only skips less without it.
TEST(CheckpointTrust, AnUnfitTopicStopsExactlyOnceAndIsAWarningInAtLeastOnce) {
  kafka::CheckpointScan scan;
  scan.unfit = "topic pgoutbox.checkpoints has cleanup.policy=delete";
  feed(scan, kSlot.key(), kafka::encode(signed_at(0x8000)));
  auto exactly_once = facts();
  exactly_once.delivery = config::Delivery::exactly_once;
  const auto refused = trust_checkpoint(scan, exactly_once);
  ASSERT_TRUE(refused.refused);
  EXPECT_EQ(refused.refused->cause, Fatal::checkpoint_refused);
  EXPECT_NE(refused.refused->reason.find("cleanup.policy=delete"), std::string::npos) << refused.refused->reason;
  const auto warned = trust_checkpoint(scan, facts());
  EXPECT_FALSE(warned.refused);
  ASSERT_FALSE(warned.warnings.empty());
  EXPECT_NE(warned.warnings.front().find("cleanup.policy=delete"), std::string::npos) << warned.warnings.front();
}

TEST(CheckpointTrust, EveryFieldMustAgreeWithThisInstance) {
  for (const auto& change : std::vector<std::function<void(kafka::Checkpoint&)>>{
           [](auto& x) { x.delivery = "exactly-once"; }, [](auto& x) { x.transactional_id = "pgoutbox-other"; },
           [](auto& x) { x.slot.database = "other"; }, [](auto& x) { x.timeline = 2; }}) {
    kafka::CheckpointScan scan;
    scan.mine = checkpoint_at(0x5000);
    change(*scan.mine);
    const auto resume = trust_checkpoint(scan, facts());
    EXPECT_EQ(resume.skip_below, Lsn{}) << kafka::encode(*scan.mine);
    EXPECT_FALSE(resume.warnings.empty()) << kafka::encode(*scan.mine);
  }
  kafka::CheckpointScan scan;
  scan.mine = checkpoint_at(0x5000);
  EXPECT_EQ(trust_checkpoint(scan, facts()).skip_below, Lsn{0x5000});
}

// Issue 37 item 6: the derived id of a database whose name has a '-' changed; the checkpoint the
// earlier version wrote under its id is this slot's still, and no other id's is.
TEST(CheckpointTrust, ACheckpointOfTheEarlierDerivedIdIsThisSlotsAndNoOtherIdsIs) {
  auto written = checkpoint_at(0x5000);
  written.delivery = "exactly-once";
  written.transactional_id = "pgoutbox-7-shop-eu-foo";
  kafka::CheckpointScan scan;
  scan.mine = written;
  auto f = facts();
  f.delivery = config::Delivery::exactly_once;
  f.transactional_id = "pgoutbox-7-shop%2Deu-foo";
  EXPECT_EQ(trust_checkpoint(scan, f).skip_below, Lsn{}) << "without the earlier id";
  f.legacy_transactional_id = "pgoutbox-7-shop-eu-foo";
  EXPECT_EQ(trust_checkpoint(scan, f).skip_below, Lsn{0x5000});
  scan.mine->transactional_id = "pgoutbox-7-shop-eu-foo-alt";
  EXPECT_EQ(trust_checkpoint(scan, f).skip_below, Lsn{});
}

// A checkpoint of an earlier version that names a non-transactional message (xid 0 and a
// fingerprint of its content) is not trusted: a forged message at its position would prove it
// (issue 37 item 3).
TEST(CheckpointTrust, ACheckpointNamingAMessageIsNotTrusted) {
  auto c = checkpoint_at(0x5000);
  c.xid = 0;
  c.commit_time = 0x12345;
  kafka::CheckpointScan scan;
  scan.mine = c;
  const auto resume = trust_checkpoint(scan, facts());
  EXPECT_EQ(resume.skip_below, Lsn{});
  EXPECT_TRUE(resume.covered.empty());
  ASSERT_EQ(resume.warnings.size(), 1U);
  EXPECT_NE(resume.warnings[0].find("names a non-transactional message"), std::string::npos) << resume.warnings[0];
}

// A checkpoint that covers messages after its transaction carries and signs their end; one
// without signs and encodes what it did before they were covered (so it verifies as it did).
TEST(CheckpointSignature, TheCoveredMessagesAreSignedOnlyWhenThereAreAny) {
  auto c = checkpoint_at(0x5000);
  auto plain = c;
  kKey.sign(plain);
  EXPECT_EQ(kafka::signed_text(plain).find("messages_end"), std::string::npos);
  c.messages_end = Lsn{0x5100};
  kKey.sign(c);
  EXPECT_NE(c.mac, plain.mac);
  const auto back = kafka::decode(kafka::encode(c));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->messages_end, Lsn{0x5100});
  EXPECT_EQ(back->end(), Lsn{0x5100});
  EXPECT_TRUE(kKey.verifies(*back));
  auto moved = *back;
  moved.messages_end = Lsn{0x5200};
  EXPECT_FALSE(kKey.verifies(moved));
  EXPECT_EQ(kafka::encode(plain).find("messages_end"), std::string::npos);
}

// A signed record of version 2 (its LSN maybe a keepalive's, no transaction named) is still this
// slot's genuine checkpoint, and is not trusted to skip: nothing could prove its history.
TEST(CheckpointTrust, AVersionTwoCheckpointIsKeptButNotTrustedToSkip) {
  auto old = checkpoint_at(0x5000);
  old.version = 2;
  old.xid = 0;
  kKey.sign(old);
  const auto encoded = kafka::encode(old);
  EXPECT_EQ(encoded.find("xid"), std::string::npos) << encoded;
  kafka::CheckpointScan scan;
  feed(scan, kSlot.key(), encoded);
  ASSERT_TRUE(scan.mine);
  EXPECT_EQ(scan.refused_count, 0U);
  EXPECT_EQ(scan.mine->version, 2);
  const auto resume = trust_checkpoint(scan, facts());
  EXPECT_EQ(resume.skip_below, Lsn{});
  ASSERT_EQ(resume.warnings.size(), 1U);
  EXPECT_NE(resume.warnings[0].find("version 2"), std::string::npos) << resume.warnings[0];
}

// A newer checkpoint may be hidden behind an open Kafka transaction (docs/spec.md I11):
// exactly-once, which would publish committed transactions again on an older one, refuses to
// start with its own exit code; at-least-once takes the older one, which skips less.
TEST(CheckpointTrust, AHiddenEndStopsExactlyOnceAndLetsAtLeastOnceTakeTheOlderCheckpoint) {
  kafka::CheckpointScan scan;
  scan.mine = signed_at(0x2000);
  scan.hidden = "partition 0 ends at offset 3 for read_committed, short of 5";
  scan.hidden_partition = 0;
  scan.hidden_offset = 3;
  auto at_least_once = trust_checkpoint(scan, facts());
  EXPECT_FALSE(at_least_once.refused);
  EXPECT_EQ(at_least_once.skip_below, Lsn{0x2000});
  ASSERT_FALSE(at_least_once.warnings.empty());
  EXPECT_NE(at_least_once.warnings[0].find("short of 5"), std::string::npos) << at_least_once.warnings[0];

  auto eos_facts = facts();
  eos_facts.delivery = config::Delivery::exactly_once;
  const auto exactly_once = trust_checkpoint(scan, eos_facts);
  ASSERT_TRUE(exactly_once.refused);
  EXPECT_EQ(exactly_once.refused->cause, Fatal::checkpoint_hidden);
  EXPECT_EQ(exit_code(exactly_once.refused->cause), 23);
  EXPECT_NE(exactly_once.refused->reason.find("Fix:"), std::string::npos) << exactly_once.refused->reason;
  // A hanging transaction (one the coordinator does not know) never ends by itself: the command
  // that aborts it.
  EXPECT_NE(exactly_once.refused->reason.find("abort --topic pgoutbox.checkpoints --partition 0 --start-offset 3"),
            std::string::npos)
      << exactly_once.refused->reason;
  EXPECT_EQ(exactly_once.skip_below, Lsn{});
}

// A checkpoint topic the reader had to create, while the slot is older than this start: the
// topic that held the slot's checkpoints is gone (issue 37, item 1). Exactly-once, which would
// publish again what Kafka holds, refuses to start (exit 25) unless the operator accepts it;
// at-least-once says it. A slot this process created has no checkpoint to lose.
TEST(CheckpointTrust, ACheckpointTopicCreatedNowForAnOlderSlotStopsExactlyOnceUnlessAccepted) {
  kafka::CheckpointScan scan;
  scan.topic_missing = true;
  auto eos = facts();
  eos.delivery = config::Delivery::exactly_once;
  const auto refused = trust_checkpoint(scan, eos);
  ASSERT_TRUE(refused.refused);
  EXPECT_EQ(refused.refused->cause, Fatal::checkpoint_lost);
  EXPECT_EQ(exit_code(refused.refused->cause), 25);
  EXPECT_TRUE(refused.topic_lost);
  EXPECT_NE(refused.refused->reason.find("--accept-lost-checkpoint"), std::string::npos) << refused.refused->reason;

  auto accepted = eos;
  accepted.accept_lost_checkpoint = true;
  const auto started = trust_checkpoint(scan, accepted);
  EXPECT_FALSE(started.refused);
  EXPECT_TRUE(started.topic_lost);
  ASSERT_EQ(started.warnings.size(), 1U);
  EXPECT_NE(started.warnings[0].find("existed before this start"), std::string::npos) << started.warnings[0];

  const auto at_least_once = trust_checkpoint(scan, facts());
  EXPECT_FALSE(at_least_once.refused);
  EXPECT_TRUE(at_least_once.topic_lost);
  EXPECT_EQ(at_least_once.warnings.size(), 1U);

  auto created = eos;
  created.slot_created = true;
  const auto fresh = trust_checkpoint(scan, created);
  EXPECT_FALSE(fresh.refused);
  EXPECT_FALSE(fresh.topic_lost);
  EXPECT_TRUE(fresh.warnings.empty());

  scan.topic_missing = false;  // the topic was there, with no checkpoint of this slot yet
  EXPECT_FALSE(trust_checkpoint(scan, eos).refused);
}

// Counts what the relay reports of the checkpoint topic.
struct RefusalCounter : Observer {
  void checkpoints_refused(std::uint64_t records) override { refused += records; }
  std::uint64_t refused = 0;
};

std::vector<std::string> published_ids(const SinkScript& script) {
  std::vector<std::string> ids;
  for (const auto& p : script.produced)
    if (p.record.topic != "pgoutbox.checkpoints") ids.push_back(p.record.event_id);
  return ids;
}

// A database restored from a storage snapshot onto the same timeline (docs/spec.md I11): same
// system, timeline and slot, its WAL past the checkpoint's LSN, other transactions there. The
// checkpoint names the transaction ending at 0x2000 (xid 0x2000); the stream shows another
// history before or at it. Nothing skipped is confirmed, the session ends, the checkpoint is
// refused and counted, and the next session of the process publishes everything after the slot.
TEST(RestoredSnapshot, AnotherHistoryAtTheCheckpointConfirmsNothingSkippedAndTheNextSessionReplaysAll) {
  struct Case {
    const char* what;
    std::function<void(FakeSource&)> diverge;  // after the first transaction, skipped
  };
  const std::vector<Case> cases = {
      {"another transaction ends where the checkpoint's did",
       [](FakeSource& s) {
         s.push(begin(0x2000 - 8, 0x1234));
         s.push(insert(3));
         s.push(commit(0x2000 - 8, 0x2000), Lsn{0x2000});
       }},
      {"the same xid and end, another commit time",
       [](FakeSource& s) {
         s.push(MessageBuilder('B').int64(0x2000 - 8).int64(777).int32(0x2000));
         s.push(insert(3));
         s.push(MessageBuilder('C').int8(0).int64(0x2000 - 8).int64(0x2000).int64(777), Lsn{0x2000});
       }},
      {"a transaction commits past it, the checkpoint's never came",
       [](FakeSource& s) {
         s.push(begin(0x2400 - 8, 0x2400));
         s.push(insert(3));
         s.push(commit(0x2400 - 8, 0x2400), Lsn{0x2400});
       }},
      {"a keepalive passes it", [](FakeSource& s) { s.keepalive(Lsn{0x2400}); }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const auto checkpoints = [] {
      kafka::CheckpointScan scan;
      scan.mine = signed_at(0x2000);
      return scan;
    };
    const auto stream = [&](FakeSource& s) {
      s.push(relation());
      s.push(begin(0x1000 - 8, 0x1000));  // below the checkpoint: skipped
      s.push(insert(1));
      s.push(insert(2));
      s.push(commit(0x1000 - 8, 0x1000), Lsn{0x1000});
      s.keepalive(Lsn{0x1800});  // below it: no difference shows yet
      c.diverge(s);
    };
    RefusalCounter counter;
    Harness first;
    first.observer = &counter;
    first.checkpoints = checkpoints;
    first.stop_when_done = false;
    stream(first.source);
    const auto ended = first.run();
    EXPECT_EQ(ended.kind, Outcome::Kind::reconnect) << ended.reason;
    EXPECT_NE(ended.reason.find("another WAL history"), std::string::npos) << ended.reason;
    EXPECT_FALSE(first.timed_out);
    EXPECT_EQ(first.counters.checkpoint_skipped_transactions, 1U);
    EXPECT_LE(first.source.flush, Lsn{0x100}) << "a skipped transaction was confirmed";
    EXPECT_EQ(counter.refused, 1U);
    EXPECT_EQ(first.refused_checkpoints->size(), 1U);

    Harness next;  // the next session of the same process
    next.refused_checkpoints = first.refused_checkpoints;
    next.checkpoints = checkpoints;
    stream(next.source);
    next.source.push(begin(0x3000 - 8, 0x3000));
    next.source.push(insert(9));
    next.source.push(commit(0x3000 - 8, 0x3000), Lsn{0x3000});
    const auto replayed = next.run();
    EXPECT_EQ(replayed.kind, Outcome::Kind::stopped) << replayed.reason;
    EXPECT_EQ(next.counters.checkpoint_skipped_transactions, 0U);
    const auto ids = published_ids(next.script);
    ASSERT_GE(ids.size(), 3U);
    EXPECT_EQ(ids[0], "00000000-0000-0000-0000-000000000001");
    EXPECT_EQ(ids[1], "00000000-0000-0000-0000-000000000002");
    EXPECT_EQ(ids.back(), "00000000-0000-0000-0000-000000000009");
    EXPECT_EQ(next.source.flush, Lsn{0x3000});
  }
}

// Exactly-once: the same; nothing is committed to Kafka past the skipped transactions, and no
// checkpoint is written before the proof.
TEST(RestoredSnapshot, ExactlyOnceConfirmsAndCommitsNothingOnAnotherHistory) {
  auto config = test_config();
  config.delivery = config::Delivery::exactly_once;
  Harness h(config);
  h.checkpoints = [] {
    kafka::CheckpointScan scan;
    auto c = checkpoint_at(0x2000);
    c.delivery = "exactly-once";
    c.transactional_id = "pgoutbox-test";
    kKey.sign(c);
    scan.mine = c;
    return scan;
  };
  h.stop_when_done = false;
  h.source.push(relation());
  h.txn(0x1000, 2, 1);
  h.source.push(begin(0x2000 - 8, 0x1234));
  h.source.push(insert(3));
  h.source.push(commit(0x2000 - 8, 0x2000), Lsn{0x2000});
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::reconnect) << outcome.reason;
  EXPECT_TRUE(h.script.committed.empty());
  EXPECT_LE(h.source.flush, Lsn{0x100});
  EXPECT_EQ(h.refused_checkpoints->size(), 1U);
}

// The matching transaction proves the history: what was skipped is confirmed, and the
// checkpoint written next names a transaction, never a keepalive's position past it.
TEST(RestoredSnapshot, TheCheckpointsOwnTransactionProvesTheHistoryAndCheckpointsNameTransactions) {
  Harness h;
  h.config.checkpoint.interval = 2ms;
  h.checkpoints = [] {
    kafka::CheckpointScan scan;
    scan.mine = signed_at(0x2000);
    return scan;
  };
  h.source.push(relation());
  h.txn(0x1000, 2, 1);
  h.txn(0x2000, 1, 3);
  h.txn(0x3000, 1, 4);
  h.source.keepalive(Lsn{0x5000});
  std::vector<std::function<void()>> steps(30, [] {});
  const auto outcome = h.run(steps);
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  EXPECT_EQ(published_ids(h.script), (std::vector<std::string>{"00000000-0000-0000-0000-000000000004"}));
  EXPECT_EQ(h.source.flush, Lsn{0x5000});
  std::vector<kafka::Checkpoint> written;
  for (const auto& r : h.script.landed) {
    if (r.topic != "pgoutbox.checkpoints") continue;
    const auto c = kafka::decode(r.value);
    ASSERT_TRUE(c);
    EXPECT_TRUE(kKey.verifies(*c));
    written.push_back(*c);
  }
  ASSERT_FALSE(written.empty());
  EXPECT_EQ(written.back().lsn, Lsn{0x3000});
  EXPECT_EQ(written.back().xid, 0x3000U);
  EXPECT_EQ(written.back().version, kafka::kCheckpointVersion);
}

Bytes non_transactional_message(std::uint64_t lsn, std::string_view id) {
  const auto content = fmt::format(R"({{"id":"{}","aggregatetype":"E","aggregateid":"k","payload":{{}}}})", id);
  return MessageBuilder('M')
      .int8(0)
      .int64(lsn)
      .string("outbox")
      .int32(static_cast<std::uint32_t>(content.size()))
      .raw(content);
}

// Issue 37 item 3: a checkpoint names only a real transaction (xid and commit time, which no
// writer chooses), never a non-transactional message, whose content and position a writer who
// can call pg_logical_emit_message and restore a snapshot onto the same timeline can both
// reproduce. The first session covers transaction 0x1000 and a dead-lettered message ending at
// 0x2000. Over the same history the next session publishes neither again; over a restored
// copy where a real transaction commits at 0x1800 before a forged copy of the message, that
// transaction is published, not skipped as covered by the message.
TEST(RestoredSnapshot, ANonTransactionalMessageNeverMakesAnotherHistorysTransactionSkippable) {
  for (const auto delivery : {config::Delivery::at_least_once, config::Delivery::exactly_once}) {
    SCOPED_TRACE(delivery == config::Delivery::exactly_once ? "exactly-once" : "at-least-once");
    auto config = test_config();
    config.delivery = delivery;
    config.poison.policy = config::PoisonPolicy::dead_letter;
    config.checkpoint.interval = 2ms;
    config::MessageConfig messages;
    messages.prefix = "outbox";
    config.messages.push_back(messages);

    Harness first(config);
    first.checkpoints = [] { return kafka::CheckpointScan{}; };  // none yet: read, and written
    first.source.push(relation());
    first.txn(0x1000, 1, 1);
    first.source.push(non_transactional_message(0x2000, "nt"), Lsn{0x2000});
    std::vector<std::function<void()>> steps(30, [] {});
    ASSERT_EQ(first.run(steps).kind, Outcome::Kind::stopped);
    ASSERT_EQ(first.counters.dead_lettered, 1U);
    std::optional<kafka::Checkpoint> written;
    for (const auto& r : first.script.landed)
      if (r.topic == "pgoutbox.checkpoints") written = kafka::decode(r.value);
    ASSERT_TRUE(written);
    ASSERT_TRUE(kKey.verifies(*written));
    EXPECT_EQ(written->xid, 0x1000U) << "the checkpoint names the real transaction, not the message";
    const auto checkpoints = [&] {
      kafka::CheckpointScan scan;
      scan.mine = written;
      return scan;
    };

    Harness same(config);  // the same history again, from the slot's old position
    same.checkpoints = checkpoints;
    same.source.push(relation());
    same.txn(0x1000, 1, 1);
    same.source.push(non_transactional_message(0x2000, "nt"), Lsn{0x2000});
    same.txn(0x3000, 1, 9);
    EXPECT_EQ(same.run(steps).kind, Outcome::Kind::stopped);
    EXPECT_EQ(published_ids(same.script), (std::vector<std::string>{"00000000-0000-0000-0000-000000000009"}));
    EXPECT_EQ(same.counters.dead_lettered, 0U) << "the covered message was dead-lettered twice";

    Harness restored(config);  // a restored copy: a real transaction before a forged copy of the message
    restored.checkpoints = checkpoints;
    restored.source.push(relation());
    restored.txn(0x1000, 1, 1);
    restored.txn(0x1800, 1, 5);
    restored.source.push(non_transactional_message(0x2000, "nt"), Lsn{0x2000});
    restored.txn(0x3000, 1, 9);
    EXPECT_EQ(restored.run(steps).kind, Outcome::Kind::stopped);
    const auto ids = published_ids(restored.script);
    EXPECT_NE(std::find(ids.begin(), ids.end(), "00000000-0000-0000-0000-000000000005"), ids.end())
        << "a real transaction of another history was skipped as covered by a message";
    EXPECT_EQ(restored.counters.dead_lettered, 1U) << "the message after it is another history's: handled again";
    EXPECT_EQ(restored.source.flush, Lsn{0x3000});
  }
}

TEST(ReservedTopics, ATemplateThatCanReachOneIsRefusedUnlessItsPatternExcludesIt) {
  config::Config c;
  EXPECT_NE(config::reserved_topic_problem(c, "${aggregatetype}", ""), "");
  EXPECT_NE(config::reserved_topic_problem(c, "pgoutbox.${aggregatetype}", ""), "");
  EXPECT_NE(config::reserved_topic_problem(c, "pgoutbox.checkpoints", ""), "");
  EXPECT_NE(config::reserved_topic_problem(c, "${a}.dead-letter", "pgoutbox\\..*"), "");
  EXPECT_EQ(config::reserved_topic_problem(c, "outbox.event.${aggregatetype}", ""), "");
  EXPECT_EQ(config::reserved_topic_problem(c, "${aggregatetype}", "orders\\..*"), "");
  // The fix it proposes is a pattern that really excludes both and keeps the rest.
  const auto problem = config::reserved_topic_problem(c, "${aggregatetype}", "");
  const auto start = problem.find("topic_pattern: \"") + 16;
  const auto pattern = problem.substr(start, problem.rfind('"') - start);
  EXPECT_EQ(config::reserved_topic_problem(c, "${aggregatetype}", pattern), "") << pattern;
  const std::regex re(pattern);
  EXPECT_TRUE(std::regex_match("orders", re));
  EXPECT_TRUE(std::regex_match("pgoutbox.checkpoint", re));
  EXPECT_FALSE(std::regex_match("pgoutbox.checkpoints.other-slot", re)) << "every relay's checkpoint topics";
  EXPECT_FALSE(std::regex_match("pgoutbox.checkpoints", re));
  EXPECT_FALSE(std::regex_match("pgoutbox.dead-letter", re));
  // Kafka takes '.' and '_' for one character when it checks for colliding names: the twin of a
  // reserved topic, once created, blocks its creation (issue 38 item 3).
  EXPECT_FALSE(std::regex_match("pgoutbox_checkpoints", re));
  EXPECT_FALSE(std::regex_match("pgoutbox_dead-letter", re));
  EXPECT_NE(config::reserved_topic_problem(c, "pgoutbox_${a}", ""), "");
  EXPECT_NE(config::reserved_topic_problem(c, "${a}_dead-letter", "pgoutbox_.*"), "");
}

// One checkpoint topic per slot is what the docs advise; the topics are named under
// "pgoutbox.checkpoints" and every relay reserves every name there, so the rows of relay A cannot
// reach relay B's checkpoints, whatever A's own checkpoint.topic (issue 38 item 1).
TEST(ReservedTopics, EveryRelayReservesEveryCheckpointTopicOfTheNamingRule) {
  config::Config a;
  a.checkpoint.topic = "pgoutbox.checkpoints.relay-a";
  const auto reserved = config::reserved_topics(a);
  EXPECT_TRUE(config::is_reserved_topic(reserved, "pgoutbox.checkpoints.relay-b"));
  EXPECT_TRUE(config::is_reserved_topic(reserved, "pgoutbox_checkpoints.relay-b")) << "a twin of the prefix";
  EXPECT_TRUE(config::is_reserved_topic(reserved, "pgoutbox.checkpoints"));
  EXPECT_FALSE(config::is_reserved_topic(reserved, "pgoutbox.checkpoint"));
  EXPECT_FALSE(config::is_reserved_topic(reserved, "orders.checkpoints"));
  // A template that could reach a name under it loads (refusing "${aggregatetype}.events" would
  // refuse most configurations); such a row is poison RESERVED_TOPIC at run time, and the
  // topic_pattern a refusal proposes excludes the whole prefix.
  EXPECT_EQ(config::reserved_topic_problem(a, "${aggregatetype}.events", ""), "");
  const auto problem = config::reserved_topic_problem(a, "${aggregatetype}", "");
  const auto start = problem.find("topic_pattern: \"") + 16;
  const std::regex proposed(problem.substr(start, problem.rfind('"') - start));
  EXPECT_FALSE(std::regex_match("pgoutbox.checkpoints.relay-b", proposed));
  EXPECT_FALSE(std::regex_match("pgoutbox_checkpoints.relay-b", proposed));
  EXPECT_TRUE(std::regex_match("orders.events", proposed));
}

TEST(ReservedTopics, TopicNamesThatKafkaTakesForOneCollide) {
  EXPECT_TRUE(config::topic_names_collide("pgoutbox.dead-letter", "pgoutbox_dead-letter"));
  EXPECT_TRUE(config::topic_names_collide("a.b_c", "a_b.c"));
  EXPECT_TRUE(config::topic_names_collide("orders", "orders"));
  EXPECT_FALSE(config::topic_names_collide("pgoutbox.dead-letter", "pgoutbox-dead-letter"));
  EXPECT_FALSE(config::topic_names_collide("orders", "Orders"));
}

void expect_every_row_poison_with_checkpoint_topic(const std::string& checkpoint_topic) {
  Harness h;
  h.config.checkpoint.topic = checkpoint_topic;
  h.config.poison.policy = config::PoisonPolicy::dead_letter;
  h.source.push(relation());
  h.txn(0x1000, 2, 1);
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::stopped) << outcome.reason;
  ASSERT_EQ(h.script.produced.size(), 2U);
  for (const auto& p : h.script.produced) {
    EXPECT_EQ(p.record.topic, "dlq");
    std::map<std::string, std::string> headers;
    for (const auto& hd : p.record.headers) headers[hd.name] = hd.value;
    EXPECT_EQ(headers["pgoutbox.dlq.error.code"], "RESERVED_TOPIC");
  }
  EXPECT_EQ(h.counters.dead_lettered, 2U);
  EXPECT_EQ(h.source.flush, Lsn{0x1000});
}

// Whatever the configuration, a row whose topic is a reserved one (or its twin, a name Kafka
// takes for the same) is poison, never a record there: here every row routes into the checkpoint
// topic, and policy dead-letter applies.
// Relay A's row routed into relay B's checkpoint topic (issue 38 item 1): poison, whatever A's
// own checkpoint.topic, never written there.
TEST(ReservedTopics, ARowRoutedIntoAnotherRelaysCheckpointTopicIsPoison) {
  for (const char* other : {"pgoutbox.checkpoints.relay-b", "pgoutbox_checkpoints.relay-b"}) {
    SCOPED_TRACE(other);
    Harness h;
    h.config.checkpoint.topic = "pgoutbox.checkpoints.relay-a";
    h.config.tables.front().topic = other;
    h.config.poison.policy = config::PoisonPolicy::dead_letter;
    h.source.push(relation());
    h.txn(0x1000, 2, 1);
    EXPECT_EQ(h.run().kind, Outcome::Kind::stopped);
    ASSERT_EQ(h.script.produced.size(), 2U);
    for (const auto& p : h.script.produced) EXPECT_EQ(p.record.topic, "dlq");
    EXPECT_EQ(h.counters.dead_lettered, 2U);
  }
}

TEST(ReservedTopics, ARowRoutedIntoTheCheckpointTopicIsPoison) {
  for (const char* checkpoint_topic : {"outbox.event.E", "outbox_event.E"}) {  // the rows' template: outbox.event.E
    SCOPED_TRACE(checkpoint_topic);
    expect_every_row_poison_with_checkpoint_topic(checkpoint_topic);
  }
}

}  // namespace
}  // namespace pgoutbox::relay
