#include "pgoutbox/replication/connect_failure.h"

namespace pgoutbox::replication {
namespace {

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

}  // namespace

ConnectDiagnosis diagnose_connect_failure(std::string_view message) {
  // libpq's texts (fe-secure-openssl.c, fe-auth.c) and the server's FATALs (auth.c); they are
  // the same across the supported majors and are not translated in the C locale libpq uses here.
  if (contains(message, "certificate verify failed")) {
    return {ConnectFailure::tls_untrusted, true,
            "the server's certificate is not signed by the CA in sslrootcert: point sslrootcert (in postgres.dsn) at "
            "the CA certificate that issued the server's certificate"};
  }
  if (contains(message, "does not match host name") || contains(message, "server certificate for")) {
    return {ConnectFailure::tls_host_mismatch, true,
            "sslmode=verify-full: connect with a host name the server's certificate names (its subjectAltName), "
            "e.g. host=<name in the certificate> hostaddr=<IP>, or reissue the certificate for this host"};
  }
  if (contains(message, "connection requires a valid client certificate") ||
      contains(message, "certificate authentication failed") || contains(message, "could not load private key") ||
      contains(message, "could not read certificate") || contains(message, "tlsv1 alert unknown ca") ||
      contains(message, "sslv3 alert certificate unknown") || contains(message, "certificate required")) {
    return {ConnectFailure::tls_client_cert, true,
            "client-certificate authentication: set sslcert and sslkey in postgres.dsn to a certificate the server's "
            "ssl_ca_file trusts, whose CN is the database user (or mapped to it in pg_ident.conf); the key must be "
            "readable only by pgoutbox's user"};
  }
  if (contains(message, "no pg_hba.conf entry")) {
    return {ConnectFailure::no_hba_entry, true,
            "add a pg_hba.conf line for this user and database (hostssl <db> <user> <client address> "
            "scram-sha-256; a logical replication connection matches the database name, not the keyword "
            "replication), then SELECT pg_reload_conf()"};
  }
  if (contains(message, "password authentication failed") || contains(message, "no password supplied") ||
      contains(message, "SCRAM") || contains(message, "is not permitted to log in")) {
    return {ConnectFailure::authentication, true,
            "check the password (PGOUTBOX_POSTGRES_PASSWORD or postgres.password_file) and that the role has LOGIN"};
  }
  return {};
}

}  // namespace pgoutbox::replication
