// The relay's pure decisions, table-tested: what a failed delivery leads to (poison.h), what
// a Postgres failure means (pg_failure.h) and whether a slot can be streamed from (slot.h).

#include <gtest/gtest.h>

#include "../../src/relay/pg_failure.h"
#include "pgoutbox/relay/poison.h"
#include "pgoutbox/replication/slot.h"

namespace pgoutbox::relay {
namespace {

using namespace std::chrono_literals;
using Kind = Action::Kind;
using kafka::DeliveryFailure;

PoisonRules rules(config::PoisonPolicy policy, std::uint32_t max_retries) {
  PoisonRules r;
  r.poison.policy = policy;
  r.poison.max_retries = max_retries;
  r.poison.retry_backoff = 100ms;
  r.max_delay = 1000ms;
  r.seed = 42;
  return r;
}

TEST(Decide, Table) {
  struct Case {
    const char* name;
    DeliveryFailure failure;
    DeliveryCookie cookie;
    config::PoisonPolicy policy;
    std::uint32_t max_retries;
    Kind kind;
    DeliveryCookie next;
    std::chrono::milliseconds min_delay, max_delay;
  };
  const auto stop = config::PoisonPolicy::stop, skip = config::PoisonPolicy::skip,
             dlq = config::PoisonPolicy::dead_letter;
  const std::vector<Case> cases = {
      {"fatal rebuilds", DeliveryFailure::fatal, DeliveryCookie::batched(7), dlq, 3, Kind::rebuild,
       DeliveryCookie::batched(7), 0ms, 0ms},
      {"transient: same send again after the first delay", DeliveryFailure::retriable, DeliveryCookie::batched(7), stop,
       3, Kind::retry_after, DeliveryCookie::batched(7), 100ms, 100ms},
      {"transient dead-letter write: again", DeliveryFailure::retriable, DeliveryCookie::dead_letter_write(7), stop, 3,
       Kind::retry_after, DeliveryCookie::dead_letter_write(7), 100ms, 100ms},
      {"refused in a batch: alone, at once", DeliveryFailure::permanent, DeliveryCookie::batched(7), stop, 3,
       Kind::send_alone, DeliveryCookie::alone(7, 0), 0ms, 0ms},
      {"first retry alone", DeliveryFailure::permanent, DeliveryCookie::alone(7, 0), stop, 3, Kind::retry_after,
       DeliveryCookie::alone(7, 1), 50ms, 100ms},
      {"second retry doubles", DeliveryFailure::permanent, DeliveryCookie::alone(7, 1), stop, 3, Kind::retry_after,
       DeliveryCookie::alone(7, 2), 100ms, 200ms},
      {"capped at max", DeliveryFailure::permanent, DeliveryCookie::alone(7, 9), stop, 20, Kind::retry_after,
       DeliveryCookie::alone(7, 10), 500ms, 1000ms},
      {"retries spent: stop", DeliveryFailure::permanent, DeliveryCookie::alone(7, 3), stop, 3, Kind::stop,
       DeliveryCookie::alone(7, 3), 0ms, 0ms},
      {"retries spent: skip", DeliveryFailure::permanent, DeliveryCookie::alone(7, 3), skip, 3, Kind::skip,
       DeliveryCookie::alone(7, 3), 0ms, 0ms},
      {"retries spent: dead-letter", DeliveryFailure::permanent, DeliveryCookie::alone(7, 3), dlq, 3, Kind::dead_letter,
       DeliveryCookie::alone(7, 3), 0ms, 0ms},
      {"no retries: policy at once", DeliveryFailure::permanent, DeliveryCookie::alone(7, 0), skip, 0, Kind::skip,
       DeliveryCookie::alone(7, 0), 0ms, 0ms},
      {"dead-letter topic refuses too: stop", DeliveryFailure::permanent, DeliveryCookie::dead_letter_write(7), dlq, 3,
       Kind::stop, DeliveryCookie::dead_letter_write(7), 0ms, 0ms},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto a = decide(c.failure, c.cookie, rules(c.policy, c.max_retries));
    EXPECT_EQ(a.kind, c.kind);
    EXPECT_EQ(a.next.pack(), c.next.pack());
    EXPECT_GE(a.delay, c.min_delay);
    EXPECT_LE(a.delay, c.max_delay);
  }
}

TEST(DeliveryCookie, FactoriesRoundTrip) {
  for (const auto c : {DeliveryCookie::batched(5), DeliveryCookie::alone(5, 3), DeliveryCookie::dead_letter_write(5)}) {
    const auto back = DeliveryCookie::unpack(c.pack());
    EXPECT_EQ(back.txn, 5U);
    EXPECT_EQ(back.attempt, c.attempt);
    EXPECT_EQ(back.isolated, c.isolated);
    EXPECT_EQ(back.dead_letter, c.dead_letter);
  }
  EXPECT_FALSE(DeliveryCookie::batched(1).isolated);
  EXPECT_TRUE(DeliveryCookie::alone(1, 0).isolated);
  EXPECT_TRUE(DeliveryCookie::dead_letter_write(1).dead_letter);
}

// The message-text fallbacks, one row per rule: libpq's own failures carry no SQLSTATE.
// The text table itself is tested in tests/replication/failure_cause_test.cpp; here, what its
// causes and libpq's connection failures mean for the session.
TEST(PgFailure, TextAndConnectionFailures) {
  struct Case {
    replication::PgError error;
    Outcome::Kind kind;
    Fatal cause;
  };
  const auto at_connect = [](const char* message, replication::FailureCause failure) {
    return replication::PgError(message, replication::PgError::Fields{{}, {}, {}, true, failure});
  };
  using replication::FailureCause;
  using replication::PgError;
  const std::vector<Case> cases = {
      {at_connect("fe_sendauth: no password supplied", FailureCause::authentication), Outcome::Kind::fatal,
       Fatal::authentication},
      {at_connect("FATAL:  no pg_hba.conf entry for host", FailureCause::no_hba_entry), Outcome::Kind::fatal,
       Fatal::authentication},
      // The connection failure decides, not the text: a password Connection::open found missing
      // by libpq's status, whatever the message.
      {at_connect("connection failed: something new", FailureCause::authentication), Outcome::Kind::fatal,
       Fatal::authentication},
      {at_connect("SSL error: certificate verify failed", FailureCause::none), Outcome::Kind::reconnect,
       Fatal::internal},
      {at_connect("FATAL:  connection requires a valid client certificate", FailureCause::tls_client_cert),
       Outcome::Kind::fatal, Fatal::tls},
      {at_connect("FATAL:  permission denied to start WAL sender", FailureCause::permission), Outcome::Kind::fatal,
       Fatal::permission},
      {at_connect("FATAL:  the database system is starting up", FailureCause::none), Outcome::Kind::reconnect,
       Fatal::internal},
      {PgError("SSL error: certificate verify failed", ""), Outcome::Kind::fatal, Fatal::tls},
      {PgError("server closed the connection unexpectedly", ""), Outcome::Kind::reconnect, Fatal::internal},
      {PgError("logical decoding requires wal_level >= logical", "55000"), Outcome::Kind::fatal, Fatal::wal_level},
      {PgError("can no longer get changes from replication slot \"s\"", "55000"), Outcome::Kind::fatal,
       Fatal::slot_invalidated},
      {PgError("replication slot \"s\" was not created in this database", "55000"), Outcome::Kind::fatal,
       Fatal::slot_unusable},
      {PgError("publication \"p\" does not exist", "42704"), Outcome::Kind::fatal, Fatal::publication},
      {PgError("replication slot \"s\" does not exist", "42704"), Outcome::Kind::fatal, Fatal::slot_unusable},
  };
  for (const auto& c : cases) {
    const auto o = classify(c.error, SessionContext{150000, false});
    EXPECT_EQ(o.kind, c.kind) << c.error.what();
    if (c.kind == Outcome::Kind::fatal) {
      EXPECT_EQ(o.cause, c.cause) << c.error.what();
    }
  }
  // A client-certificate failure gets the fix Connection::open told apart, not the CA's.
  const auto cert =
      classify(at_connect("FATAL:  connection requires a valid client certificate", FailureCause::tls_client_cert),
               {150000, false});
  EXPECT_NE(cert.reason.find("sslcert and sslkey"), std::string::npos) << cert.reason;
}

TEST(PgFailure, SqlstateDecidesBeforeText) {
  struct Case {
    const char* sqlstate;
    Outcome::Kind kind;
    Fatal cause;
  };
  const std::vector<Case> cases = {
      {"55006", Outcome::Kind::reconnect, Fatal::internal},   {"28P01", Outcome::Kind::fatal, Fatal::authentication},
      {"28000", Outcome::Kind::fatal, Fatal::authentication}, {"42501", Outcome::Kind::fatal, Fatal::permission},
      {"42P01", Outcome::Kind::fatal, Fatal::table_missing},  {"53400", Outcome::Kind::fatal, Fatal::slot_unusable},
      {"42601", Outcome::Kind::fatal, Fatal::server_version}, {"57P03", Outcome::Kind::reconnect, Fatal::internal},
      {"53300", Outcome::Kind::reconnect, Fatal::internal},   {"57P01", Outcome::Kind::reconnect, Fatal::internal},
  };
  for (const auto& c : cases) {
    // The text would say "publication": the SQLSTATE wins.
    const auto o = classify(replication::PgError("publication text", c.sqlstate), SessionContext{150000, false});
    EXPECT_EQ(o.kind, c.kind) << c.sqlstate;
    if (c.kind == Outcome::Kind::fatal) {
      EXPECT_EQ(o.cause, c.cause) << c.sqlstate;
      EXPECT_NE(o.reason.find("Fix:"), std::string::npos) << o.reason;
    }
  }
  EXPECT_TRUE(classify(replication::PgError("busy", "55006"), {}).standby);
  EXPECT_NE(classify(replication::PgError("syntax error", "42601"), {140000, false}).reason.find("PostgreSQL 14"),
            std::string::npos);
}

// Issue 19 item 9: the least-privilege role cannot create the publication because it does not
// own the tables; the fix must say that, not ask for REPLICATION.
TEST(PgFailure, APermissionFailureNamesItsTrueCause) {
  const auto owner = classify(replication::PgError("ERROR:  must be owner of table outbox", "42501"), {150000, false});
  EXPECT_EQ(owner.cause, Fatal::permission);
  EXPECT_NE(owner.reason.find("Fix: creating the publication needs ownership of the outbox tables"), std::string::npos)
      << owner.reason;
  EXPECT_EQ(owner.reason.find("REPLICATION"), std::string::npos) << owner.reason;
  const auto role = classify(
      replication::PgError("FATAL:  must be superuser or replication role to start walsender", ""), {150000, false});
  EXPECT_EQ(role.cause, Fatal::permission);
  EXPECT_NE(role.reason.find("ALTER ROLE <user> LOGIN REPLICATION"), std::string::npos) << role.reason;
  EXPECT_EQ(role.reason.find("ownership"), std::string::npos) << role.reason;
}

TEST(PgFailure, AuthenticationIsPermanentOnlyUntilTheFirstStream) {
  const replication::PgError e("fe_sendauth: no password supplied", "");
  EXPECT_EQ(classify(e, {0, false}).kind, Outcome::Kind::fatal);
  EXPECT_EQ(classify(e, {0, false}).cause, Fatal::authentication);
  EXPECT_EQ(classify(e, {0, true}).kind, Outcome::Kind::reconnect);
}

TEST(ValidateSlot, Table) {
  using replication::SlotProblem;
  using replication::WalStatus;
  const auto slot = [](std::string plugin, std::string db, WalStatus w, bool two_phase) {
    replication::SlotState s;
    s.slot = "s";
    s.plugin = std::move(plugin);
    s.database = std::move(db);
    s.wal_status = w;
    s.two_phase = two_phase;
    return s;
  };
  struct Case {
    replication::SlotState state;
    std::optional<SlotProblem::Cause> problem;
  };
  const std::vector<Case> cases = {
      {slot("pgoutput", "app", WalStatus::reserved, false), std::nullopt},
      {slot("pgoutput", "app", WalStatus::unreserved, false), std::nullopt},
      {slot("pgoutput", "app", WalStatus::unknown, false), std::nullopt},
      {slot("test_decoding", "app", WalStatus::reserved, false), SlotProblem::Cause::not_logical},
      {slot("", "", WalStatus::reserved, false), SlotProblem::Cause::not_logical},
      {slot("pgoutput", "other", WalStatus::reserved, false), SlotProblem::Cause::other_database},
      {slot("pgoutput", "app", WalStatus::lost, false), SlotProblem::Cause::invalidated},
      {slot("pgoutput", "app", WalStatus::reserved, true), SlotProblem::Cause::two_phase},
  };
  for (const auto& c : cases) {
    const auto p = replication::validate_slot(c.state, "app");
    ASSERT_EQ(p.has_value(), c.problem.has_value()) << c.state.plugin;
    if (p) {
      EXPECT_EQ(p->cause, *c.problem);
      EXPECT_FALSE(p->fix.empty());
    }
  }
  // A standby's slot invalidated by a recovery conflict (16+: conflicting; 17+: a reason too)
  // cannot decode, whatever its wal_status says.
  auto conflicting = slot("pgoutput", "app", WalStatus::reserved, false);
  conflicting.conflicting = false;
  EXPECT_FALSE(replication::validate_slot(conflicting, "app"));
  conflicting.conflicting = true;
  const auto on_16 = replication::validate_slot(conflicting, "app");
  ASSERT_TRUE(on_16);
  EXPECT_EQ(on_16->cause, SlotProblem::Cause::invalidated);
  EXPECT_NE(on_16->message.find("conflicting = true"), std::string::npos) << on_16->message;
  // What 16 really shows for one (tests/versions/standby_test.cpp): wal_status lost as well. The
  // conflict is named with its fix, not taken for max_slot_wal_keep_size.
  conflicting.wal_status = WalStatus::lost;
  const auto lost_on_16 = replication::validate_slot(conflicting, "app");
  ASSERT_TRUE(lost_on_16);
  EXPECT_NE(lost_on_16->message.find("conflicting = true"), std::string::npos) << lost_on_16->message;
  EXPECT_NE(lost_on_16->fix.find("hot_standby_feedback = on"), std::string::npos) << lost_on_16->fix;
  EXPECT_EQ(lost_on_16->message.find("max_slot_wal_keep_size"), std::string::npos) << lost_on_16->message;
  conflicting.invalidation_reason = "rows_removed";
  const auto on_17 = replication::validate_slot(conflicting, "app");
  ASSERT_TRUE(on_17);
  EXPECT_NE(on_17->message.find("invalidation_reason rows_removed"), std::string::npos) << on_17->message;
  // 18's idle_replication_slot_timeout: the reason names the setting, and the fix how to keep
  // the next slot (wal_status is lost for every reason, yet the reason is what is shown).
  auto idle = slot("pgoutput", "app", WalStatus::lost, false);
  idle.invalidation_reason = "idle_timeout";
  const auto on_18 = replication::validate_slot(idle, "app");
  ASSERT_TRUE(on_18);
  EXPECT_EQ(on_18->cause, SlotProblem::Cause::invalidated);
  EXPECT_NE(on_18->message.find("invalidation_reason idle_timeout"), std::string::npos) << on_18->message;
  EXPECT_NE(on_18->message.find("idle_replication_slot_timeout"), std::string::npos) << on_18->message;
  EXPECT_EQ(on_18->message.find("max_slot_wal_keep_size"), std::string::npos) << on_18->message;
  EXPECT_NE(on_18->fix.find("pgoutbox slot drop -c FILE --yes"), std::string::npos) << on_18->fix;
  EXPECT_NE(on_18->fix.find("set it to 0"), std::string::npos) << on_18->fix;
  idle.invalidation_reason = "wal_removed";
  const auto removed = replication::validate_slot(idle, "app");
  ASSERT_TRUE(removed);
  EXPECT_NE(removed->message.find("max_slot_wal_keep_size"), std::string::npos) << removed->message;
  EXPECT_EQ(removed->fix.find("idle_replication_slot_timeout"), std::string::npos) << removed->fix;
  // Without a database to compare (the metrics monitor), that rule is skipped.
  EXPECT_FALSE(replication::validate_slot(slot("pgoutput", "other", WalStatus::reserved, false), ""));
}

TEST(WalStatus, ParsesWhatPostgresPrints) {
  for (const auto w : {replication::WalStatus::reserved, replication::WalStatus::extended,
                       replication::WalStatus::unreserved, replication::WalStatus::lost}) {
    EXPECT_EQ(replication::parse_wal_status(replication::to_string(w)), w);
  }
  EXPECT_EQ(replication::parse_wal_status(""), replication::WalStatus::unknown);
}

}  // namespace
}  // namespace pgoutbox::relay
