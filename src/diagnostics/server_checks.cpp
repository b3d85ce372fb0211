// Server settings and the role (the seeds' first troubleshooting steps): logical decoding needs
// wal_level=logical, a free replication slot and a free WAL sender, and a role with LOGIN and
// REPLICATION (PostgreSQL docs, "Logical Replication — Configuration Settings" and "Security").
// On a managed platform each fix is that platform's own (platform_fixes.h): ALTER SYSTEM is
// refused there.
#include <fmt/format.h>

#include <chrono>

#include "checks.h"
#include "pgoutbox/diagnostics/slot_status.h"
#include "platform_fixes.h"

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

// What a step read of one server setting; `fix` is empty when the setting is fine.
struct Reading {
  std::string message;
  std::string fix;
};

// A server limit and how much of it is in use: the first two columns of the row `sql` reads.
struct Usage {
  long max = 0;
  long used = 0;
  std::vector<std::string> row;
};
Usage read_usage(const CheckContext& ctx, const std::string& sql) {
  auto row = first_row(ctx.conn, sql);
  return {std::stol(row.at(0)), std::stol(row.at(1)), std::move(row)};
}

Reading check_wal_level(const CheckContext& ctx) {
  const auto level = first_row(ctx.conn, "SELECT pg_catalog.current_setting('wal_level')").at(0);
  if (level == "logical") return {"logical", ""};
  return {fmt::format("is {}; logical decoding needs logical.", level),
          wal_level_fix(ctx.platform.platform, ctx.signals)};
}

Reading check_slots(const CheckContext& ctx) {
  const auto slots = read_usage(ctx,
                                "SELECT pg_catalog.current_setting('max_replication_slots')::int, "
                                "(SELECT count(*) FROM pg_catalog.pg_replication_slots), "
                                "EXISTS (SELECT 1 FROM pg_catalog.pg_replication_slots WHERE slot_name = " +
                                    ctx.conn.literal(ctx.config.postgres.slot) + ")");
  const bool ours = slots.row.at(2) == "t";
  if (ours || slots.used < slots.max) {
    return {fmt::format("{} of {} in use{}", slots.used, slots.max, ours ? ", this slot among them" : ""), ""};
  }
  return {fmt::format("all {} slots are in use and this slot is not one of them.", slots.max),
          fmt::format("drop a slot nobody uses (SELECT slot_name, active FROM pg_replication_slots) or {}.",
                      server_setting_fix(ctx.platform.platform, "max_replication_slots"))};
}

Reading check_senders(const CheckContext& ctx) {
  // Sessions of other roles show their backend type only with pg_read_all_stats, so the count
  // can be low for an unprivileged role: a full server still fails at start with "too many".
  const auto senders =
      read_usage(ctx,
                 "SELECT pg_catalog.current_setting('max_wal_senders')::int, "
                 "(SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE backend_type = 'walsender')");
  if (senders.used < senders.max) return {fmt::format("{} of {} in use", senders.used, senders.max), ""};
  return {fmt::format("all {} WAL senders are in use{}.", senders.max, senders.max == 0 ? " (it is 0)" : ""),
          fmt::format("{} or stop an idle replication client.",
                      server_setting_fix(ctx.platform.platform, "max_wal_senders"))};
}

// The platform's settings, roles and functions that exist here. A setting is read one at a time:
// a platform may reserve one to privileged roles, and that one then only goes unseen.
ServerSignals read_signals(const replication::Connection& conn) {
  ServerSignals signals;
  for (const auto name : kPlatformSettings) {
    try {
      auto res = conn.exec("SELECT pg_catalog.current_setting(" + conn.literal(std::string(name)) + ", true)");
      if (PQntuples(res.get()) == 1 && PQgetisnull(res.get(), 0, 0) == 0) {
        signals.settings.emplace(name, PQgetvalue(res.get(), 0, 0));
      }
    } catch (const replication::PgError&) {  // NOLINT(bugprone-empty-catch): unreadable is unseen
    }
  }
  const auto names = [&](const std::vector<std::string_view>& list) {
    std::string array;
    for (const auto name : list) array += (array.empty() ? "" : ", ") + conn.literal(std::string(name));
    return "ARRAY[" + array + "]";
  };
  auto roles = conn.exec("SELECT rolname FROM pg_catalog.pg_roles WHERE rolname = ANY (" + names(kPlatformRoles) + ")");
  for (int r = 0; r < PQntuples(roles.get()); ++r) signals.roles.emplace(PQgetvalue(roles.get(), r, 0));
  auto functions = conn.exec("SELECT DISTINCT proname FROM pg_catalog.pg_proc WHERE proname = ANY (" +
                             names(kPlatformFunctions) + ")");
  for (int r = 0; r < PQntuples(functions.get()); ++r) signals.functions.emplace(PQgetvalue(functions.get(), r, 0));
  return signals;
}

// The pooler the connection's host and port name, if they name one.
std::optional<PoolerEndpoint> pooler_of(const replication::Connection& conn) {
  const char* host = PQhost(conn.raw());
  const char* port = PQport(conn.raw());
  return pooler_endpoint(host != nullptr ? host : "", port != nullptr ? port : "");
}

}  // namespace

void check_platform(CheckContext& ctx) {
  try {
    ctx.signals = read_signals(ctx.conn);
    ctx.platform = recognise(ctx.signals);
  } catch (const replication::PgError& e) {
    ctx.findings.push_back(Finding::warning("platform", fmt::format("cannot be told: {}.", e.what()),
                                            "the fixes below are those of self-managed PostgreSQL; check that "
                                            "pg_catalog.pg_roles and pg_proc are readable."));
  }
  if (ctx.platform.platform != Platform::self_managed) {
    ctx.findings.push_back(Finding::ok(
        "platform", fmt::format("{} (it shows {})", platform_name(ctx.platform.platform), ctx.platform.evidence)));
  }
  if (const auto pooler = pooler_of(ctx.conn)) {
    ctx.findings.push_back(Finding::warning(
        "postgres endpoint",
        fmt::format("{}: a pooler shares server sessions between clients, and a replication connection needs one of "
                    "its own",
                    pooler->what),
        fmt::format("point postgres.dsn at {}.", pooler->direct)));
  }
}

// What the standby needs of its primary, read over postgres.primary_dsn: wal_level = logical there
// (the standby decodes only WAL written with it), the physical slot the standby streams through,
// and the right to ask for a running-transactions record. False with a finding for each miss.
static bool check_primary(CheckContext& ctx, const std::string& physical_slot) {
  const std::string subject = "hot standby";
  const auto& pg = ctx.config.postgres;
  std::vector<std::string> row;
  try {
    const auto primary = replication::Connection::open(pg.primary_dsn, false, pg.application_name + "-check",
                                                       pg.password, std::chrono::seconds(5));
    const std::string slot = primary.literal(physical_slot);
    row = first_row(
        primary,
        "SELECT pg_catalog.pg_is_in_recovery(), pg_catalog.current_setting('wal_level'), "
        "EXISTS (SELECT 1 FROM pg_catalog.pg_replication_slots WHERE slot_type = 'physical' AND slot_name = " +
            slot + "), pg_catalog.has_function_privilege('pg_catalog.pg_log_standby_snapshot()', 'EXECUTE')");
  } catch (const std::exception& e) {
    ctx.findings.push_back(Finding::blocking(
        subject, fmt::format("postgres.primary_dsn cannot be read: {}.", e.what()),
        "point postgres.primary_dsn at the standby's primary, reachable with the same role and password."));
    return false;
  }
  bool fine = true;
  const auto fail = [&](std::string message, std::string fix) {
    fine = false;
    ctx.findings.push_back(Finding::blocking(subject, std::move(message), std::move(fix)));
  };
  if (row.at(0) == "t") {
    fail(
        "postgres.primary_dsn is itself a standby: only the primary writes the running-transactions records a slot "
        "on a standby waits for.",
        "point postgres.primary_dsn at the primary of the replication chain.");
    return false;
  }
  if (row.at(1) != "logical") {
    fail(fmt::format("wal_level is {} on the primary: a standby decodes only WAL written with wal_level = logical, "
                     "and its slots are invalidated (wal_level_insufficient) when the primary's falls below.",
                     row.at(1)),
         "ALTER SYSTEM SET wal_level = logical; on the primary, and restart it.");
  }
  if (!physical_slot.empty() && row.at(2) != "t") {
    fail(fmt::format("the primary has no physical replication slot {} (this standby's primary_slot_name).",
                     physical_slot),
         fmt::format("SELECT pg_create_physical_replication_slot('{}'); on the primary.", physical_slot));
  }
  if (row.at(3) != "t") {
    fail(
        "the role may not call pg_log_standby_snapshot() on the primary: slot creation here then waits for the "
        "primary's own next running-transactions record.",
        "GRANT EXECUTE ON FUNCTION pg_log_standby_snapshot() TO <role>; on the primary.");
  }
  return fine;
}

// On a hot standby (docs/versions.md, "Decoding on a standby"): decoding needs 16+, and the slot
// stays valid only while the primary keeps the catalog rows it needs (hot_standby_feedback over a
// physical slot); without postgres.primary_dsn the slot's creation waits for the primary.
static void check_standby(CheckContext& ctx) {
  const std::string subject = "hot standby";
  const auto row = first_row(ctx.conn,
                             "SELECT pg_catalog.pg_is_in_recovery(), pg_catalog.current_setting('server_version_num'), "
                             "pg_catalog.current_setting('hot_standby_feedback'), "
                             "pg_catalog.current_setting('primary_slot_name')");
  if (row.empty() || row.at(0) != "t") return;
  if (std::stol(row.at(1)) < 160000) {
    ctx.findings.push_back(Finding::blocking(subject,
                                             "this server is a standby, and decoding on a standby needs "
                                             "PostgreSQL 16 or later.",
                                             "point postgres.dsn at the primary, or upgrade to 16+."));
    return;
  }
  bool fine = true;
  if (row.at(2) != "on") {
    fine = false;
    ctx.findings.push_back(Finding::blocking(
        subject,
        "hot_standby_feedback is off: a vacuum on the primary can remove catalog rows the slot needs, and the "
        "slot is then invalidated (conflicting = true).",
        "ALTER SYSTEM SET hot_standby_feedback = on; SELECT pg_reload_conf(); on this standby."));
  }
  if (row.at(3).empty()) {
    fine = false;
    ctx.findings.push_back(Finding::blocking(
        subject,
        "primary_slot_name is not set: without a physical slot on the primary, its feedback does not hold vacuum "
        "back while the standby is disconnected, and the slot can be invalidated.",
        "SELECT pg_create_physical_replication_slot('<name>') on the primary, then primary_slot_name = '<name>' "
        "on this standby."));
  }
  if (!ctx.config.postgres.primary_dsn.empty()) {
    fine = check_primary(ctx, row.at(3)) && fine;
  } else {
    ctx.findings.push_back(Finding::warning(
        subject,
        "postgres.primary_dsn is not set: creating the slot here waits for the primary's next running-transactions "
        "record (within 15 s of WAL there, at its next checkpoint when it is idle); rows committed meanwhile are "
        "not in the new slot.",
        "set postgres.primary_dsn to the primary (pgoutbox calls pg_log_standby_snapshot() there), or create the "
        "slot beforehand."));
  }
  if (fine && !ctx.config.postgres.primary_dsn.empty()) {
    ctx.findings.push_back(Finding::ok(
        subject,
        fmt::format("hot_standby_feedback = on, primary_slot_name = {}; on postgres.primary_dsn: wal_level = logical, "
                    "the physical slot exists, pg_log_standby_snapshot() may be called",
                    row.at(3))));
  }
}

void check_server(CheckContext& ctx) {
  // Each step stands alone: a failed query is reported and the next step still runs.
  const std::pair<const char*, Reading (*)(const CheckContext&)> steps[] = {
      {"wal_level", check_wal_level}, {"max_replication_slots", check_slots}, {"max_wal_senders", check_senders}};
  for (const auto& [subject, step] : steps) {
    try {
      auto reading = step(ctx);
      ctx.findings.push_back(reading.fix.empty()
                                 ? Finding::ok(subject, std::move(reading.message))
                                 : Finding::blocking(subject, std::move(reading.message), std::move(reading.fix)));
    } catch (const replication::PgError& e) {
      ctx.findings.push_back(Finding::blocking(subject, fmt::format("cannot be read: {}.", e.what()),
                                               "make sure the role may read server settings (SHOW)."));
    }
  }
  try {
    check_standby(ctx);
  } catch (const replication::PgError& e) {
    ctx.findings.push_back(Finding::blocking("hot standby", fmt::format("cannot be read: {}.", e.what()),
                                             "make sure the role may read server settings (SHOW)."));
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
    // Amazon RDS lets members of rds_replication replicate without the REPLICATION attribute.
    const auto platform_role = replication_role(ctx.platform.platform);
    const bool member = platform_role && !replication && !superuser &&
                        first_row(ctx.conn, "SELECT pg_catalog.pg_has_role(current_user, " +
                                                ctx.conn.literal(*platform_role) + ", 'MEMBER')")
                                .at(0) == "t";
    may_replicate = replication || superuser || member;
    if (may_replicate) {
      ctx.findings.push_back(
          Finding::ok(subject, superuser ? "is a superuser (a role with only REPLICATION is enough: sql/role.sql)"
                               : member  ? fmt::format("is a member of {} ({}'s replication role)", *platform_role,
                                                       platform_name(ctx.platform.platform))
                                         : "has REPLICATION"));
    } else {
      ctx.findings.push_back(Finding::blocking(
          subject,
          platform_role ? fmt::format("lacks REPLICATION and is not a member of {}, which opening a replication "
                                      "connection and reading a slot need.",
                                      *platform_role)
                        : "lacks REPLICATION, which opening a replication connection and reading a slot need.",
          replication_right_fix(ctx.platform.platform, ctx.conn.identifier(ctx.user))));
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
    if (pooler_refusal(e.what())) {
      // A pooler answered, not PostgreSQL: no setting of the server's fixes that.
      const auto known = pooler_of(ctx.conn);
      const std::string error = e.what();  // its first line: the server's LINE/caret lines follow
      ctx.findings.push_back(Finding::blocking(
          "replication connection",
          fmt::format("cannot be opened: the endpoint is a connection pooler, which cannot carry a replication "
                      "connection ({}).",
                      error.substr(0, error.find('\n'))),
          fmt::format("point postgres.dsn at {}.",
                      known ? known->direct
                            : "PostgreSQL itself (the server's host and port, not the pooler's: PgBouncer listens on "
                              "6432 by default)")));
      return;
    }
    ctx.findings.push_back(Finding::blocking(
        "replication connection", fmt::format("cannot be opened: {}.", e.what()),
        fmt::format("allow role {} to connect to database {} in pg_hba.conf (replication=database connections match "
                    "database lines), and check max_wal_senders.",
                    ctx.user, ctx.database)));
  }
}

}  // namespace pgoutbox::diagnostics::detail
