#pragma once

// What each supported PostgreSQL major offers a pgoutput client, decided once from the server
// version (PQserverVersion) so that no command or catalog query names something the server
// lacks (docs/pgoutput.md, "Protocol versions").

#include <string>

namespace pgoutbox::replication {

// 14 is the oldest major pgoutbox supports: pgoutput's `messages` option and proto_version 2
// arrive with it.
inline constexpr int kOldestSupportedServer = 140000;

struct ServerFeatures {
  int server_version = 0;
  int proto_version = 1;           // pgoutput proto_version: 14 → 2, 15 → 3, 16 and later → 4
  bool messages = false;           // START_REPLICATION option `messages` (14)
  bool two_phase = false;          // pgoutput option `two_phase` (15); pgoutbox decodes at commit
  bool slot_options_list = false;  // CREATE_REPLICATION_SLOT … (SNAPSHOT 'nothing') (15)
  bool standby_decoding = false;   // logical decoding on a hot standby (16)
  bool failover_slots = false;     // slots synchronised to a physical standby (17)
  // Publication option publish_generated_columns (none | stored), and stored generated columns
  // named in a column list are published (18); before, pgoutput never sends a generated column.
  bool publish_generated_columns = false;
  bool idle_slot_timeout = false;  // idle_replication_slot_timeout invalidates an idle slot (18)
  // pg_replication_slots columns beyond slot_name … wal_status (13):
  bool slot_two_phase = false;    // two_phase (14)
  bool slot_conflicting = false;  // conflicting (16)
  bool slot_failover = false;     // failover, synced, inactive_since, invalidation_reason (17)

  // "PostgreSQL 14.23: proto_version 2, messages, no two_phase, …" for the start-up log.
  std::string describe() const;
};

// The features of `server_version` (PQserverVersion's form, 140011 or 170004).
ServerFeatures features_of(int server_version);

// "14.23" or "9.6.24" from PQserverVersion's number.
std::string version_text(int server_version);

// Throws PgError with SQLSTATE 0A000 (feature_not_supported) naming the version and what it
// lacks when `server_version` is older than kOldestSupportedServer.
void require_supported_server(int server_version);

// Throws PgError 0A000 when `failover_slot` is asked of a server before 17, whose slots cannot
// be synchronised to a standby.
void require_failover_support(const ServerFeatures& features, bool failover_slot);

}  // namespace pgoutbox::replication
