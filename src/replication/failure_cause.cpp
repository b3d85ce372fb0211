#include "pgoutbox/replication/failure_cause.h"

#include <initializer_list>

namespace pgoutbox::replication {
namespace {

// libpq's texts (fe-secure-openssl.c, fe-auth.c) and the server's (auth.c, postinit.c,
// slot.c, pgoutput.c); they are the same across the supported majors and are not translated
// in the C locale libpq uses here. The first rule with a fragment in the message decides; an
// empty fragment matches any message of its SQLSTATE. `fix`: what the operator changes when a
// connection cannot be opened for that cause.
struct TextRule {
  std::string_view sqlstate;
  FailureCause cause;
  std::initializer_list<std::string_view> fragments;
  std::string_view fix;
};
const TextRule kTextRules[] = {
    // sslmode=verify-*: a certificate of another CA, or no root certificate to check it with.
    {"",
     FailureCause::tls_untrusted,
     {"certificate verify failed", "root certificate file"},
     "the server's certificate is not signed by the CA in sslrootcert: point sslrootcert (in postgres.dsn) at the CA "
     "certificate that issued the server's certificate"},
    {"",
     FailureCause::tls_host_mismatch,
     {"does not match host name", "server certificate for"},
     "sslmode=verify-full: connect with a host name the server's certificate names (its subjectAltName), e.g. "
     "host=<name in the certificate> hostaddr=<IP>, or reissue the certificate for this host"},
    {"",
     FailureCause::tls_client_cert,
     {"connection requires a valid client certificate", "certificate authentication failed",
      "could not load private key", "could not read certificate", "tlsv1 alert unknown ca",
      "sslv3 alert certificate unknown", "certificate required"},
     "client-certificate authentication: set sslcert and sslkey in postgres.dsn to a certificate the server's "
     "ssl_ca_file trusts, whose CN is the database user (or mapped to it in pg_ident.conf); the key must be readable "
     "only by pgoutbox's user"},
    // 28000.
    {"",
     FailureCause::no_hba_entry,
     {"no pg_hba.conf entry"},
     "add a pg_hba.conf line for this user and database (hostssl <db> <user> <client address> scram-sha-256; a "
     "logical replication connection matches the database name, not the keyword replication), then SELECT "
     "pg_reload_conf()"},
    // 28P01, fe_sendauth, a role without LOGIN.
    {"",
     FailureCause::authentication,
     {"password authentication failed", "no password supplied", "SCRAM", "is not permitted to log in"},
     "check the password (PGOUTBOX_POSTGRES_PASSWORD or postgres.password_file) and that the role has LOGIN"},
    // 42501: "must be superuser or replication role" up to 15, "permission denied to start WAL
    // sender" from 16, "permission denied for database" without CONNECT.
    {"",
     FailureCause::permission,
     {"must be superuser or replication role", "permission denied"},
     "grant the role LOGIN and REPLICATION (see sql/role.sql), e.g. ALTER ROLE <user> LOGIN REPLICATION, and "
     "CONNECT on the database"},
    {"55000", FailureCause::wal_level, {"wal_level"}, ""},
    {"55000", FailureCause::slot_invalidated, {"can no longer get changes", "invalidated"}, ""},
    {"55000", FailureCause::publication, {"publication"}, ""},
    {"55000", FailureCause::slot_unusable, {""}, ""},
    {"42704", FailureCause::publication, {"publication"}, ""},
    {"42704", FailureCause::slot_unusable, {""}, ""},  // the replication slot does not exist
};

}  // namespace

FailureCause cause_of_text(std::string_view sqlstate, std::string_view message) {
  for (const auto& rule : kTextRules) {
    if (rule.sqlstate != sqlstate) continue;
    for (const auto fragment : rule.fragments) {
      if (message.find(fragment) != std::string_view::npos) return rule.cause;
    }
  }
  return FailureCause::none;
}

FailureCause connect_failure_of(bool needs_password, std::string_view libpq_message) {
  return needs_password ? FailureCause::authentication : cause_of_text("", libpq_message);
}

std::string_view connect_fix(FailureCause cause) {
  for (const auto& rule : kTextRules) {
    if (rule.cause == cause && !rule.fix.empty()) return rule.fix;
  }
  return {};
}

}  // namespace pgoutbox::replication
