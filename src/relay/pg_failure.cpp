#include "pg_failure.h"

#include <fmt/format.h>

#include "pgoutbox/replication/failure_cause.h"

namespace pgoutbox::relay {
namespace {

using replication::FailureCause;

std::string with_fix(const std::string& what, std::string_view fix) {
  return what.find(fix) == std::string::npos ? fmt::format("{}. Fix: {}", what, fix) : what;
}

// The outcome of a cause libpq's status, the SQLSTATE or the text table named.
Outcome outcome_of(FailureCause cause, const std::string& what, const SessionContext& context) {
  switch (cause) {
    case FailureCause::none:
      return Outcome::reconnect(what);
    case FailureCause::tls_untrusted:
    case FailureCause::tls_host_mismatch:
    case FailureCause::tls_client_cert:
      if (context.ever_streamed) return Outcome::reconnect(what);
      return Outcome::fatal(Fatal::tls, with_fix(what, replication::connect_fix(cause)));
    case FailureCause::no_hba_entry:
    case FailureCause::authentication:
      if (context.ever_streamed) return Outcome::reconnect(what);
      // The same fix as `check` gives for the same cause.
      return Outcome::fatal(Fatal::authentication, with_fix(what, replication::connect_fix(cause)));
    case FailureCause::permission:
      // CREATE PUBLICATION … FOR TABLE needs ownership of each table (42501 "must be owner of
      // table …"): no grant of REPLICATION fixes that, so say what does.
      if (what.find("must be owner of") != std::string::npos) {
        return Outcome::fatal(Fatal::permission,
                              with_fix(what,
                                       "creating the publication needs ownership of the outbox tables: create it as "
                                       "their owner (sql/publication.sql) and set postgres.create_publication: false"));
      }
      return Outcome::fatal(Fatal::permission,
                            with_fix(what,
                                     "grant the role LOGIN and REPLICATION (see sql/role.sql), e.g. ALTER ROLE <user> "
                                     "LOGIN REPLICATION"));
    case FailureCause::wal_level:
      return Outcome::fatal(Fatal::wal_level,
                            with_fix(what, "set wal_level = logical in postgresql.conf and restart PostgreSQL"));
    case FailureCause::slot_invalidated:
      return Outcome::fatal(Fatal::slot_invalidated,
                            with_fix(what,
                                     "drop and recreate the slot (pgoutbox slot drop --yes), then reconcile: "
                                     "events written while the slot was lost may be missing from Kafka"));
    case FailureCause::publication:
      return Outcome::fatal(Fatal::publication, what);  // its messages name the fix
    case FailureCause::slot_unusable:
      return Outcome::fatal(Fatal::slot_unusable, what);
  }
  return Outcome::reconnect(what);
}

}  // namespace

Outcome classify(const replication::PgError& error, const SessionContext& context) {
  const std::string what = error.what();
  if (const auto failure = error.fields().connect_failure) return outcome_of(*failure, what, context);
  const std::string_view state = error.sqlstate();
  if (state == "55006") return Outcome::waiting_as_standby(what);
  if (state == "28P01" || state == "28000") return outcome_of(FailureCause::authentication, what, context);
  if (state == "42501") return outcome_of(FailureCause::permission, what, context);
  if (state == "42P01") {
    return Outcome::fatal(Fatal::table_missing,
                          with_fix(what, "create the table, or remove it from tables: in the configuration"));
  }
  if (state == "53400") {
    return Outcome::fatal(Fatal::slot_unusable,
                          with_fix(what,
                                   "raise max_replication_slots (a restart of PostgreSQL), or drop a slot nothing "
                                   "uses (SELECT slot_name, active FROM pg_replication_slots)"));
  }
  if (state == "42601") {
    return Outcome::fatal(
        Fatal::server_version,
        fmt::format("{}. PostgreSQL {} does not understand a replication command pgoutbox sends (pgoutbox chooses "
                    "the slot syntax and proto_version by the server's major, 14 and later). Fix: run pgoutbox "
                    "against PostgreSQL 14 or later, and report this if the server is 14 or later",
                    what,
                    context.server_version == 0 ? std::string("(version unknown)")
                                                : std::to_string(context.server_version / 10000)));
  }
  // replication::ServerFeatures refused it; the message names the version and the fix.
  if (state == "0A000") return Outcome::fatal(Fatal::server_version, what);
  return outcome_of(replication::cause_of_text(state, what), what, context);
}

}  // namespace pgoutbox::relay
