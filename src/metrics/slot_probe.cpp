#include "pgoutbox/metrics/slot_probe.h"

#include <prometheus/family.h>

namespace pgoutbox::metrics {
namespace {

prometheus::Gauge& gauge(prometheus::Registry& r, const std::string& name, const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}

}  // namespace

SlotProbe::SlotProbe(prometheus::Registry& r)
    : up_gauge_(gauge(r, "pgoutbox_postgres_up",
                      "1 when Postgres answered the last slot query on pgoutbox's monitoring connection.")),
      lag_gauge_(gauge(r, "pgoutbox_replication_lag_bytes",
                       "WAL bytes between the server's current position and the slot's confirmed_flush_lsn.")),
      retained_gauge_(gauge(r, "pgoutbox_slot_retained_wal_bytes",
                            "WAL bytes the slot keeps on the server: current position minus restart_lsn.")),
      active_gauge_(
          gauge(r, "pgoutbox_slot_active", "1 when a walsender is using the slot (pg_replication_slots.active).")),
      wal_status_(
          prometheus::BuildGauge()
              .Name("pgoutbox_slot_wal_status")
              .Help("1 for the slot's current wal_status (reserved, extended, unreserved, lost), or for "
                    "\"missing\" when the server answered without the slot; all 0 while Postgres does not answer.")
              .Register(r)),
      in_recovery_gauge_(gauge(r, "pgoutbox_postgres_in_recovery",
                               "1 when postgres.dsn is a hot standby (pg_is_in_recovery()): the slot decodes the WAL "
                               "it replays.")),
      unreplayed_gauge_(gauge(r, "pgoutbox_standby_unreplayed_bytes",
                              "On a hot standby: WAL it has received from its primary and not yet replayed.")),
      replay_delay_gauge_(gauge(r, "pgoutbox_standby_replay_delay_seconds",
                                "On a hot standby with WAL left to replay: seconds since the last replayed "
                                "transaction committed on the primary; 0 when it has replayed all it received.")),
      behind_primary_gauge_(
          gauge(r, "pgoutbox_standby_behind_primary_bytes",
                "With postgres.primary_dsn: WAL the primary wrote that the standby has not replayed.")),
      primary_xmin_age_gauge_(
          gauge(r, "pgoutbox_primary_xmin_age",
                "With postgres.primary_dsn: age in transactions of the xmin the standby's physical "
                "slot holds on the primary (hot_standby_feedback: vacuum waits for it); 0 for none.")),
      primary_catalog_xmin_age_gauge_(
          gauge(r, "pgoutbox_primary_catalog_xmin_age",
                "With postgres.primary_dsn: age in transactions of the catalog_xmin the standby's physical slot holds "
                "on the primary for its logical slots; 0 for none.")) {
  for (const char* status : kWalStatuses) wal_status_.Add({{"status", status}});
}

void SlotProbe::record(const SlotSample& sample) {
  up_ = true;
  up_gauge_.Set(1);
  active_gauge_.Set(sample.exists && sample.active ? 1 : 0);
  const std::string current = sample.exists ? sample.wal_status : "missing";
  for (const char* status : kWalStatuses) wal_status_.Add({{"status", status}}).Set(current == status ? 1 : 0);
  if (sample.lag_bytes) {
    lag_ = *sample.lag_bytes;
    lag_gauge_.Set(static_cast<double>(*sample.lag_bytes));
  }
  if (sample.retained_bytes) retained_gauge_.Set(static_cast<double>(*sample.retained_bytes));
  in_recovery_gauge_.Set(sample.in_recovery ? 1 : 0);
  unreplayed_gauge_.Set(static_cast<double>(sample.unreplayed_bytes.value_or(0)));
  replay_delay_gauge_.Set(sample.replay_delay_seconds.value_or(0));
  if (sample.behind_primary_bytes) behind_primary_gauge_.Set(static_cast<double>(*sample.behind_primary_bytes));
  if (sample.behind_primary_bytes || !sample.in_recovery) {  // read on the primary, or no standby at all
    primary_xmin_age_gauge_.Set(static_cast<double>(sample.primary_xmin_age.value_or(0)));
    primary_catalog_xmin_age_gauge_.Set(static_cast<double>(sample.primary_catalog_xmin_age.value_or(0)));
  }
}

void SlotProbe::unreachable() {
  up_ = false;
  up_gauge_.Set(0);
  // Unknown is not "missing": only a server that answered without the slot says that. No status
  // is 1 until Postgres answers again (a stale one would be as misleading).
  for (const char* status : kWalStatuses) wal_status_.Add({{"status", status}}).Set(0);
}

std::optional<std::int64_t> SlotProbe::lag_bytes() const {
  const auto value = lag_.load();
  if (value < 0) return std::nullopt;
  return value;
}

}  // namespace pgoutbox::metrics
