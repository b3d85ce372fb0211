// Nobody but pgoutbox makes it skip (docs/spec.md I11), without services: the checkpoint's
// signature, which records of the checkpoint topic the reader keeps, when a kept one decides
// what to skip, and that no row routes itself into a reserved topic. The same attacks against
// the real binary, Postgres and Kafka are in tests/security/checkpoint_forgery_test.cpp.

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <regex>

#include "pgoutbox/config/topic_template.h"
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
  EXPECT_EQ(resume.skip_below(), Lsn{0x2000});
  EXPECT_EQ(resume.refused_records, 3U);
  ASSERT_EQ(resume.warnings.size(), 3U);
  EXPECT_NE(resume.warnings[0].find("partition 0 offset 11"), std::string::npos) << resume.warnings[0];
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
  EXPECT_EQ(resume.skip_below(), Lsn{});
  EXPECT_NE(resume.note.find("not signed"), std::string::npos) << resume.note;
}

TEST(CheckpointTrust, EveryFieldMustAgreeWithThisInstance) {
  for (const auto& change : std::vector<std::function<void(kafka::Checkpoint&)>>{
           [](auto& x) { x.delivery = "exactly-once"; }, [](auto& x) { x.transactional_id = "pgoutbox-other"; },
           [](auto& x) { x.slot.database = "other"; }, [](auto& x) { x.timeline = 2; }}) {
    kafka::CheckpointScan scan;
    scan.mine = checkpoint_at(0x5000);
    change(*scan.mine);
    const auto resume = trust_checkpoint(scan, facts());
    EXPECT_EQ(resume.skip_below(), Lsn{}) << kafka::encode(*scan.mine);
    EXPECT_FALSE(resume.warnings.empty()) << kafka::encode(*scan.mine);
  }
  kafka::CheckpointScan scan;
  scan.mine = checkpoint_at(0x5000);
  EXPECT_EQ(trust_checkpoint(scan, facts()).skip_below(), Lsn{0x5000});
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
  EXPECT_TRUE(std::regex_match("pgoutbox.checkpointsX", re));
  EXPECT_FALSE(std::regex_match("pgoutbox.checkpoints", re));
  EXPECT_FALSE(std::regex_match("pgoutbox.dead-letter", re));
}

// Whatever the configuration, a row whose topic is a reserved one is poison, never a record
// there: here every row routes into the checkpoint topic, and policy dead-letter applies.
TEST(ReservedTopics, ARowRoutedIntoTheCheckpointTopicIsPoison) {
  Harness h;
  h.config.checkpoint.topic = "outbox.event.E";  // what the rows' template expands to
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

}  // namespace
}  // namespace pgoutbox::relay
