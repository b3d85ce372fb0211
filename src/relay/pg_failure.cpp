#include "pg_failure.h"

#include <array>

#include <fmt/format.h>

namespace pgoutbox::relay {
namespace {

// Message fragments, for failures the SQLSTATE alone does not name. `sqlstate` empty: libpq's
// own failure (it reports no SQLSTATE for a failed connection attempt, whose server message is
// the only trace of 28000, 28P01, 57P03 or 53300 there).
struct TextRule {
  std::string_view sqlstate;
  std::string_view fragment;
  PgCause cause;
};
constexpr std::array kTextRules{
    TextRule{"", "fe_sendauth: no password supplied", PgCause::authentication},
    TextRule{"", "password authentication failed", PgCause::authentication},  // 28P01
    TextRule{"", "no pg_hba.conf entry", PgCause::authentication},            // 28000
    TextRule{"", "certificate verify failed", PgCause::tls},
    TextRule{"", "root certificate file", PgCause::tls},   // sslmode=verify-* without a root certificate
    TextRule{"", "server certificate for", PgCause::tls},  // host name does not match the certificate
    TextRule{"", "must be superuser or replication role", PgCause::permission},  // 42501 at connect
    TextRule{"", "permission denied", PgCause::permission},
    TextRule{"", "the database system is starting up", PgCause::transient},  // 57P03
    TextRule{"", "too many clients", PgCause::transient},                    // 53300
    TextRule{"55000", "wal_level", PgCause::wal_level},
    TextRule{"55000", "can no longer get changes", PgCause::slot_invalidated},
    TextRule{"55000", "invalidated", PgCause::slot_invalidated},
    TextRule{"55000", "publication", PgCause::publication},
    TextRule{"55000", "", PgCause::slot_unusable},
    TextRule{"42704", "publication", PgCause::publication},
    TextRule{"42704", "", PgCause::slot_unusable},  // the replication slot does not exist
};

std::string with_fix(const std::string& what, std::string_view fix) {
  return what.find(fix) == std::string::npos ? fmt::format("{}. Fix: {}", what, fix) : what;
}

}  // namespace

PgCause cause_of_text(std::string_view sqlstate, std::string_view message) {
  for (const auto& rule : kTextRules) {
    if (rule.sqlstate == sqlstate && message.find(rule.fragment) != std::string_view::npos) return rule.cause;
  }
  return PgCause::transient;
}

PgCause cause_of(const replication::PgError& error) {
  const std::string_view state = error.sqlstate();
  if (state == "55006") return PgCause::standby;
  if (state == "28P01" || state == "28000") return PgCause::authentication;
  if (state == "42501") return PgCause::permission;
  if (state == "42P01") return PgCause::table_missing;
  if (state == "53400") return PgCause::slot_limit;
  if (state == "42601") return PgCause::server_version;
  if (state == "0A000") return PgCause::unsupported_feature;  // replication::ServerFeatures refused it
  return cause_of_text(state, error.what());
}

Outcome classify(const replication::PgError& error, const SessionContext& context) {
  const std::string what = error.what();
  const auto cause = cause_of(error);
  if ((cause == PgCause::authentication || cause == PgCause::tls) && context.ever_streamed) {
    return Outcome::reconnect(what);
  }
  switch (cause) {
    case PgCause::transient:
      return Outcome::reconnect(what);
    case PgCause::standby:
      return Outcome::waiting_as_standby(what);
    case PgCause::authentication:
      return Outcome::fatal(Fatal::authentication,
                            with_fix(what,
                                     "check the password (PGOUTBOX_POSTGRES_PASSWORD or postgres.password_file) "
                                     "and that pg_hba.conf allows this user both the database and replication "
                                     "connections"));
    case PgCause::tls:
      return Outcome::fatal(Fatal::tls, with_fix(what,
                                                 "give libpq the CA that signed the server's certificate "
                                                 "(sslrootcert in postgres.dsn), or connect by the host name the "
                                                 "certificate names"));
    case PgCause::permission:
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
    case PgCause::wal_level:
      return Outcome::fatal(Fatal::wal_level,
                            with_fix(what, "set wal_level = logical in postgresql.conf and restart PostgreSQL"));
    case PgCause::table_missing:
      return Outcome::fatal(Fatal::table_missing,
                            with_fix(what, "create the table, or remove it from tables: in the configuration"));
    case PgCause::slot_invalidated:
      return Outcome::fatal(Fatal::slot_invalidated,
                            with_fix(what,
                                     "drop and recreate the slot (pgoutbox slot drop --yes), then reconcile: "
                                     "events written while the slot was lost may be missing from Kafka"));
    case PgCause::slot_limit:
      return Outcome::fatal(Fatal::slot_unusable,
                            with_fix(what,
                                     "raise max_replication_slots (a restart of PostgreSQL), or drop a slot "
                                     "nothing uses (SELECT slot_name, active FROM pg_replication_slots)"));
    case PgCause::publication:
      return Outcome::fatal(Fatal::publication, what);  // its messages name the fix
    case PgCause::slot_unusable:
      return Outcome::fatal(Fatal::slot_unusable, what);
    case PgCause::server_version:
      return Outcome::fatal(
          Fatal::server_version,
          fmt::format("{}. PostgreSQL {} does not understand a replication command pgoutbox sends (pgoutbox chooses "
                      "the slot syntax and proto_version by the server's major, 14 and later). Fix: run pgoutbox "
                      "against PostgreSQL 14 or later, and report this if the server is 14 or later",
                      what,
                      context.server_version == 0 ? std::string("(version unknown)")
                                                  : std::to_string(context.server_version / 10000)));
    case PgCause::unsupported_feature:
      return Outcome::fatal(Fatal::server_version, what);  // the message names the version and the fix
  }
  return Outcome::reconnect(what);
}

}  // namespace pgoutbox::relay
