// Server settings and the role (the seeds' first troubleshooting steps): logical decoding needs
// wal_level=logical, a free replication slot and a free WAL sender, and a role with LOGIN and
// REPLICATION (PostgreSQL docs, "Logical Replication — Configuration Settings" and "Security").
#include <fmt/format.h>

#include "checks.h"
#include "pgoutbox/diagnostics/slot_status.h"

namespace pgoutbox::diagnostics::detail {

std::vector<std::string> first_row(const replication::Connection& conn, const std::string& sql) {
  auto res = conn.exec(sql);
  std::vector<std::string> row;
  if (PQntuples(res.get()) == 0) return row;
  for (int c = 0; c < PQnfields(res.get()); ++c) {
    row.emplace_back(PQgetisnull(res.get(), 0, c) ? "" : PQgetvalue(res.get(), 0, c));
  }
  return row;
}

namespace {

void check_wal_level(CheckContext& ctx) {
  const auto level = first_row(ctx.conn, "SELECT pg_catalog.current_setting('wal_level')").at(0);
  if (level == "logical") {
    ctx.findings.push_back(Finding::ok("wal_level", "logical"));
    return;
  }
  ctx.findings.push_back(Finding::blocking(
      "wal_level", fmt::format("is {}; logical decoding needs logical.", level),
      "as a superuser run ALTER SYSTEM SET wal_level = logical (or set it in postgresql.conf), then restart "
      "PostgreSQL."));
}

void check_slots(CheckContext& ctx) {
  const auto row = first_row(ctx.conn,
                             "SELECT pg_catalog.current_setting('max_replication_slots')::int, "
                             "(SELECT count(*) FROM pg_catalog.pg_replication_slots), "
                             "EXISTS (SELECT 1 FROM pg_catalog.pg_replication_slots WHERE slot_name = " +
                                 ctx.conn.literal(ctx.config.postgres.slot) + ")");
  const long max = std::stol(row.at(0));
  const long used = std::stol(row.at(1));
  const bool ours = row.at(2) == "t";
  if (ours || used < max) {
    ctx.findings.push_back(Finding::ok(
        "max_replication_slots", fmt::format("{} of {} in use{}", used, max, ours ? ", this slot among them" : "")));
    return;
  }
  ctx.findings.push_back(Finding::blocking(
      "max_replication_slots", fmt::format("all {} slots are in use and this slot is not one of them.", max),
      "drop a slot nobody uses (SELECT slot_name, active FROM pg_replication_slots) or raise max_replication_slots "
      "(ALTER SYSTEM, then restart PostgreSQL)."));
}

void check_senders(CheckContext& ctx) {
  // Sessions of other roles show their backend type only with pg_read_all_stats, so the count
  // can be low for an unprivileged role: a full server still fails at start with "too many".
  const auto row = first_row(ctx.conn,
                             "SELECT pg_catalog.current_setting('max_wal_senders')::int, "
                             "(SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE backend_type = 'walsender')");
  const long max = std::stol(row.at(0));
  const long used = std::stol(row.at(1));
  if (used < max) {
    ctx.findings.push_back(Finding::ok("max_wal_senders", fmt::format("{} of {} in use", used, max)));
    return;
  }
  ctx.findings.push_back(Finding::blocking(
      "max_wal_senders", fmt::format("all {} WAL senders are in use{}.", max, max == 0 ? " (it is 0)" : ""),
      "raise max_wal_senders (ALTER SYSTEM, then restart PostgreSQL) or stop an idle replication client."));
}

}  // namespace

void check_server(CheckContext& ctx) {
  // Each step stands alone: a failed query is reported and the next step still runs.
  const std::pair<const char*, void (*)(CheckContext&)> steps[] = {
      {"wal_level", check_wal_level}, {"max_replication_slots", check_slots}, {"max_wal_senders", check_senders}};
  for (const auto& [subject, step] : steps) {
    try {
      step(ctx);
    } catch (const replication::PgError& e) {
      ctx.findings.push_back(Finding::blocking(subject, fmt::format("cannot be read: {}.", e.what()),
                                               "make sure the role may read server settings (SHOW)."));
    }
  }
}

void check_role(CheckContext& ctx) {
  const std::string subject = "role " + ctx.user;
  bool may_replicate = false;
  try {
    const auto row = first_row(ctx.conn,
                               "SELECT rolcanlogin, rolreplication, rolsuper FROM pg_catalog.pg_roles WHERE rolname = "
                               "current_user");
    const bool login = row.at(0) == "t";
    const bool replication = row.at(1) == "t";
    const bool superuser = row.at(2) == "t";
    if (login) {
      ctx.findings.push_back(Finding::ok(subject, "has LOGIN"));
    } else {
      ctx.findings.push_back(Finding::blocking(subject, "lacks LOGIN.",
                                               fmt::format("ALTER ROLE {} LOGIN;", ctx.conn.identifier(ctx.user))));
    }
    may_replicate = replication || superuser;
    if (may_replicate) {
      ctx.findings.push_back(
          Finding::ok(subject, superuser ? "is a superuser (a role with only REPLICATION is enough: sql/role.sql)"
                                         : "has REPLICATION"));
    } else {
      ctx.findings.push_back(Finding::blocking(
          subject, "lacks REPLICATION, which opening a replication connection and reading a slot need.",
          fmt::format("as a superuser: ALTER ROLE {} REPLICATION; (or use the least-privilege role of sql/role.sql).",
                      ctx.conn.identifier(ctx.user))));
    }
  } catch (const replication::PgError& e) {
    ctx.findings.push_back(Finding::blocking(subject, fmt::format("attributes cannot be read: {}.", e.what()),
                                             "check that pg_catalog.pg_roles is readable."));
  }
  if (!may_replicate) return;
  // pg_hba.conf decides separately whether a replication=database connection is allowed.
  try {
    auto walsender = replication::Connection::open(
        ctx.config.postgres.dsn, true, ctx.config.postgres.application_name + "-check", ctx.config.postgres.password);
    walsender.identify_system();
    ctx.findings.push_back(Finding::ok("replication connection", "opens (IDENTIFY_SYSTEM answered)"));
  } catch (const replication::PgError& e) {
    ctx.findings.push_back(Finding::blocking(
        "replication connection", fmt::format("cannot be opened: {}.", e.what()),
        fmt::format("allow role {} to connect to database {} in pg_hba.conf (replication=database connections match "
                    "database lines), and check max_wal_senders.",
                    ctx.user, ctx.database)));
  }
}

}  // namespace pgoutbox::diagnostics::detail
