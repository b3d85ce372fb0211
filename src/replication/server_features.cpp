#include "pgoutbox/replication/server_features.h"

#include <fmt/format.h>

#include "pgoutbox/replication/connection.h"

namespace pgoutbox::replication {

ServerFeatures features_of(int server_version) {
  ServerFeatures f;
  f.server_version = server_version;
  const int major = server_version / 10000;
  f.proto_version = major >= 16 ? 4 : major == 15 ? 3 : major == 14 ? 2 : 1;
  f.messages = major >= 14;
  f.slot_two_phase = major >= 14;
  f.two_phase = major >= 15;
  f.slot_options_list = major >= 15;
  f.standby_decoding = major >= 16;
  f.slot_conflicting = major >= 16;
  f.failover_slots = major >= 17;
  f.slot_failover = major >= 17;
  f.publish_generated_columns = major >= 18;
  f.idle_slot_timeout = major >= 18;
  return f;
}

std::string version_text(int server_version) {
  // From 10 on the number is major * 10000 + minor; before, major * 10000 + minor1 * 100 + minor2.
  if (server_version >= 100000) return fmt::format("{}.{}", server_version / 10000, server_version % 10000);
  return fmt::format("{}.{}.{}", server_version / 10000, server_version / 100 % 100, server_version % 100);
}

std::string ServerFeatures::describe() const {
  const auto yes_no = [](bool on) { return on ? "yes" : "no"; };
  return fmt::format(
      "PostgreSQL {}: pgoutput proto_version {}, messages {}, two_phase available {} (not requested: pgoutbox "
      "decodes at commit), failover slots {}, decoding on a standby {}",
      version_text(server_version), proto_version, yes_no(messages), yes_no(two_phase), yes_no(failover_slots),
      yes_no(standby_decoding));
}

void require_supported_server(int server_version) {
  if (server_version >= kOldestSupportedServer) return;
  throw PgError(fmt::format("PostgreSQL {} is not supported: pgoutbox needs 14 or later (pgoutput's messages option "
                            "and proto_version 2 arrive with 14). Fix: upgrade the server to 14 or later "
                            "(16 or later recommended)",
                            version_text(server_version)),
                "0A000");
}

void require_failover_support(const ServerFeatures& features, bool failover_slot) {
  if (!failover_slot || features.failover_slots) return;
  throw PgError(fmt::format("postgres.failover_slot needs PostgreSQL 17 or later; this server is {}. Fix: set "
                            "postgres.failover_slot: false (a failover then needs a new slot, and events committed "
                            "since the last confirmation are lost), or upgrade to 17",
                            version_text(features.server_version)),
                "0A000");
}

}  // namespace pgoutbox::replication
