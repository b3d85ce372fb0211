// Logical decoding messages through the relay without services (src/relay/messages.cpp): order
// with the rows of their transaction, confirm-after-ack for the refused non-transactional ones,
// and other prefixes holding nothing back.

#include <gtest/gtest.h>

#include "relay_fakes.h"

namespace pgoutbox::relay {
namespace {

using namespace pgoutbox::relay::testing;
using namespace std::chrono_literals;

Bytes message(bool transactional, std::uint64_t lsn, std::string_view prefix, std::string_view content) {
  return MessageBuilder('M')
      .int8(transactional ? 1 : 0)
      .int64(lsn)
      .string(prefix)
      .int32(static_cast<std::uint32_t>(content.size()))
      .raw(content);
}

std::string envelope(std::string_view id, std::string_view key = "k") {
  return fmt::format(R"({{"id":"{}","aggregatetype":"E","aggregateid":"{}","payload":{{"m":"{}"}}}})", id, key, id);
}

config::Config with_messages() {
  auto c = test_config();
  config::MessageConfig m;
  m.prefix = "outbox";
  c.messages.push_back(m);
  return c;
}

TEST(RelayMessages, TransactionalMessagesGoInWalOrderWithTheRowsAndAreConfirmedWithThem) {
  Harness h(with_messages());
  h.script.hold = true;
  h.source.push(relation());
  h.source.push(begin(0x1000 - 8, 7));
  h.source.push(insert(1));
  h.source.push(message(true, 0x900, "outbox", envelope("m1")));
  h.source.push(insert(2));
  h.source.push(message(true, 0x910, "outbox", envelope("m2")));
  h.source.push(commit(0x1000 - 8, 0x1000), Lsn{0x1000});
  std::vector<Lsn> flush;
  const auto look = [&] { flush.push_back(h.source.flush); };
  h.run({[] {}, look, [&] { h.script.release(0); }, [&] { h.script.release(1); }, [&] { h.script.release(2); }, look,
         [&] { h.script.release(3); }, look});
  ASSERT_EQ(h.script.produced.size(), 4U);
  std::vector<std::string> ids;
  for (const auto& p : h.script.produced) ids.push_back(p.record.event_id);
  EXPECT_EQ(ids, (std::vector<std::string>{"00000000-0000-0000-0000-000000000001", "m1",
                                           "00000000-0000-0000-0000-000000000002", "m2"}));
  EXPECT_EQ(h.script.produced[1].record.value, R"({"m":"m1"})");
  EXPECT_EQ(h.script.produced[1].record.table, "message:outbox");
  EXPECT_EQ(flush, (std::vector<Lsn>{Lsn{0x100}, Lsn{0x100}, Lsn{0x1000}}));
  EXPECT_EQ(h.counters.messages_received, 2U);
}

TEST(RelayMessages, ANonTransactionalMessageIsRefusedAndNotConfirmedBeforeItsDeadLetterIsAcknowledged) {
  auto c = with_messages();
  c.poison.policy = config::PoisonPolicy::dead_letter;
  Harness h(c);
  h.script.hold = true;
  h.source.push(message(false, 0x2000, "outbox", envelope("nt")), Lsn{0x2000});
  h.source.keepalive(Lsn{0x3000});
  std::vector<Lsn> flush;
  const auto look = [&] { flush.push_back(h.source.flush); };
  h.run({[] {}, look, [&] { h.script.release_all(); }, look});
  ASSERT_EQ(h.script.produced.size(), 1U);
  EXPECT_EQ(h.script.produced[0].record.topic, c.poison.dead_letter_topic);
  bool coded = false;
  for (const auto& header : h.script.produced[0].record.headers)
    coded = coded || (header.name == "pgoutbox.dlq.error.code" && header.value == "NON_TRANSACTIONAL");
  EXPECT_TRUE(coded);
  // Neither the message's own LSN nor the keepalive past it before the dead-letter ack.
  EXPECT_EQ(flush, (std::vector<Lsn>{Lsn{0x100}, Lsn{0x3000}}));
  EXPECT_EQ(h.counters.messages_non_transactional, 1U);
  EXPECT_EQ(h.counters.dead_lettered, 1U);
}

TEST(RelayMessages, StopPolicyOnANonTransactionalMessageConfirmsNothingPastIt) {
  auto c = with_messages();
  c.poison.policy = config::PoisonPolicy::stop;
  Harness h(c);
  h.source.push(relation());
  h.txn(0x1000, 1);
  h.source.push(message(false, 0x2000, "outbox", envelope("nt")), Lsn{0x2000});
  h.source.keepalive(Lsn{0x3000});
  const auto outcome = h.run();
  EXPECT_EQ(outcome.kind, Outcome::Kind::fatal);
  EXPECT_EQ(outcome.cause, Fatal::poison);
  EXPECT_NE(outcome.reason.find("NON_TRANSACTIONAL"), std::string::npos) << outcome.reason;
  EXPECT_LT(h.source.flush, Lsn{0x2000});
}

TEST(RelayMessages, OtherPrefixesAreIgnoredAndHoldNothingBack) {
  Harness h(with_messages());
  h.source.push(begin(0x1000 - 8, 7));
  h.source.push(message(true, 0x900, "someone-else", "not json"));
  h.source.push(message(true, 0x910, "outbox2", envelope("x")));
  h.source.push(commit(0x1000 - 8, 0x1000), Lsn{0x1000});
  h.source.push(message(false, 0x2000, "heartbeat", ""), Lsn{0x2000});
  h.source.keepalive(Lsn{0x2100});
  h.run();
  EXPECT_TRUE(h.script.produced.empty());
  EXPECT_EQ(h.source.flush, Lsn{0x2100});
  EXPECT_EQ(h.counters.changes_ignored, 3U);
  EXPECT_EQ(h.counters.messages_received, 0U);
}

TEST(RelayMessages, APoisonEnvelopeGoesThroughThePolicyAndTheRestOfItsTransactionFlows) {
  auto c = with_messages();
  c.poison.policy = config::PoisonPolicy::skip;
  Harness h(c);
  h.source.push(begin(0x1000 - 8, 7));
  h.source.push(message(true, 0x900, "outbox", "{\"id\": "));
  h.source.push(message(true, 0x910, "outbox", R"({"aggregatetype":"E","payload":{}})"));
  h.source.push(message(true, 0x920, "outbox", envelope("good")));
  h.source.push(commit(0x1000 - 8, 0x1000), Lsn{0x1000});
  h.run();
  ASSERT_EQ(h.script.produced.size(), 1U);
  EXPECT_EQ(h.script.produced[0].record.event_id, "good");
  EXPECT_EQ(h.counters.skipped, 2U);
  EXPECT_EQ(h.source.flush, Lsn{0x1000});
}

// An envelope above the producer's message.max.bytes (kafka.properties) is poison without being
// parsed, and its dead-letter record goes without it (outbox/envelope.h).
TEST(RelayMessages, AnEnvelopeAboveMessageMaxBytesIsPoisonAndItsDeadLetterHasNoValue) {
  auto c = with_messages();
  c.poison.policy = config::PoisonPolicy::dead_letter;
  c.kafka.properties["message.max.bytes"] = "100";
  Harness h(c);
  const auto big = fmt::format(R"({{"id":"big","aggregatetype":"E","payload":"{}"}})", std::string(100, 'x'));
  h.source.push(begin(0x1000 - 8, 7));
  h.source.push(message(true, 0x900, "outbox", big));
  h.source.push(message(true, 0x920, "outbox", envelope("small")));
  h.source.push(commit(0x1000 - 8, 0x1000), Lsn{0x1000});
  h.run();
  ASSERT_EQ(h.script.produced.size(), 2U);
  std::size_t dead = 0;
  for (const auto& produced : h.script.produced) {
    const auto& record = produced.record;
    if (record.topic != c.poison.dead_letter_topic) {
      EXPECT_EQ(record.event_id, "small");
      continue;
    }
    ++dead;
    EXPECT_TRUE(record.value.empty());
    std::string code;
    for (const auto& header : record.headers) {
      if (header.name == "pgoutbox.dlq.error.code") code = header.value;
    }
    EXPECT_EQ(code, "ENVELOPE_TOO_LARGE");
  }
  EXPECT_EQ(dead, 1U);
  EXPECT_EQ(h.source.flush, Lsn{0x1000});
}

}  // namespace
}  // namespace pgoutbox::relay
