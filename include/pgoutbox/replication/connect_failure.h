#pragma once

// Why libpq could not open a connection, told from its message (a failed connection start has
// no SQLSTATE unless the server sent one), and what the operator does about it. Shared by `run`
// (the message it logs) and `check` (its Fix: line).

#include <string>
#include <string_view>

namespace pgoutbox::replication {

enum class ConnectFailure {
  tls_untrusted,      // the server's certificate does not chain to sslrootcert
  tls_host_mismatch,  // verify-full: the certificate does not name the host connected to
  tls_client_cert,    // the server wants a client certificate, or refused the one given
  authentication,     // wrong password, or a role that may not log in
  no_hba_entry,       // pg_hba.conf has no line for this host, user, database (and SSL state)
  other,              // refused, unreachable, shutting down, …: transient
};

struct ConnectDiagnosis {
  ConnectFailure kind = ConnectFailure::other;
  // True when retrying cannot help until the operator changes something.
  bool permanent = false;
  std::string fix;  // empty for `other`
};

ConnectDiagnosis diagnose_connect_failure(std::string_view libpq_message);

}  // namespace pgoutbox::replication
