#include "pgoutbox/diagnostics/preflight.h"

#include <fmt/format.h>

#include <algorithm>

#include "checks.h"
#include "pgoutbox/config/redact.h"
#include "pgoutbox/diagnostics/platform.h"
#include "pgoutbox/diagnostics/slot_status.h"
#include "pgoutbox/replication/failure_cause.h"
#include "pgoutbox/replication/server_features.h"

namespace pgoutbox::diagnostics {

std::vector<Finding> check_postgres(const config::Config& config) {
  std::vector<Finding> findings;
  const std::string where = config::redact_dsn(config.postgres.dsn);
  std::optional<replication::Connection> conn;
  try {
    conn.emplace(connect_ordinary(config, "check"));
  } catch (const replication::PgError& e) {
    // libpq's message names host, port, user and the reason, never the password.
    std::string message = e.what();
    message = message.substr(0, message.find(". Fix: "));
    if (pooler_refusal(message)) {
      // PgBouncer before 1.23 refuses the startup parameters every pgoutbox connection sends.
      findings.push_back(Finding::blocking(
          "postgres", fmt::format("{} ({}): the endpoint is a connection pooler, not PostgreSQL", message, where),
          "point postgres.dsn at PostgreSQL itself (the server's host and port, not the pooler's; on a managed "
          "platform its direct endpoint: docs/managed-postgres.md)."));
      return findings;
    }
    const auto fix = replication::connect_fix(e.fields().connect_failure.value_or(replication::FailureCause::none));
    findings.push_back(Finding::blocking(
        "postgres", fmt::format("{} ({})", message, where),
        fix.empty() ? "check postgres.dsn (host, port, dbname, user), the password (PGOUTBOX_POSTGRES_PASSWORD "
                      "or postgres.password_file) and pg_hba.conf."
                    : fmt::format("{}.", fix)));
    return findings;
  }
  std::vector<std::string> who;
  try {
    who = detail::first_row(*conn,
                            "SELECT current_user, current_database(), pg_catalog.current_setting('server_version')");
  } catch (const replication::PgError& e) {
    findings.push_back(Finding::blocking("postgres", fmt::format("connected, but a first query failed: {}", e.what()),
                                         "check the server's log."));
    return findings;
  }
  findings.push_back(
      Finding::ok("postgres", fmt::format("connected to {} as {}, PostgreSQL {}", where, who.at(0), who.at(2))));
  const auto features = replication::features_of(conn->server_version());
  try {
    replication::require_supported_server(features.server_version);
    replication::require_failover_support(features, config.postgres.failover_slot);
  } catch (const replication::PgError& e) {
    // Every later check would query catalogs this server lays out differently: stop here. The
    // error's text is "<what>. Fix: <fix>".
    const std::string what = e.what();
    const auto at = what.find(". Fix: ");
    findings.push_back(Finding::blocking(kServerVersionSubject, what.substr(0, at + 1),
                                         at == std::string::npos ? std::string() : what.substr(at + 7)));
    return findings;
  }
  findings.push_back(Finding::ok(kServerVersionSubject, features.describe()));
  detail::CheckContext ctx{config, *conn, who.at(0), who.at(1), findings};
  detail::check_platform(ctx);
  detail::check_server(ctx);
  detail::check_role(ctx);
  detail::check_tables(ctx);
  detail::check_slot(ctx);
  detail::check_idle_slot_timeout(ctx);
  return findings;
}

bool unsupported_server(const std::vector<Finding>& findings) {
  return std::any_of(findings.begin(), findings.end(), [](const Finding& f) {
    return f.severity == Severity::blocking && f.subject == kServerVersionSubject;
  });
}

}  // namespace pgoutbox::diagnostics
