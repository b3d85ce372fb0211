#pragma once

// A physical hot standby of a test primary, made the way the npm server packages allow (they
// have no pg_basebackup): pg_backup_start(), a copy of the data directory, pg_backup_stop() and
// its backup_label, standby.signal. The standby streams from the primary through a physical slot.

#include <map>
#include <memory>
#include <string>

#include "pg_cluster.h"

namespace pgoutbox::test {

// Creates the physical slot `physical_slot` on `primary` (when it does not exist yet), then a
// standby of it that streams through that slot with hot_standby = on; `settings` are more
// postgresql.conf lines of the standby (hot_standby_feedback, sync_replication_slots, …). The
// standby is started and replaying when this returns.
std::unique_ptr<PgCluster> make_standby(const PgCluster& primary, const std::string& physical_slot,
                                        std::map<std::string, std::string> settings = {});

// Replaces `standby`'s data directory with a new base backup of `primary` and starts it again on
// the same port: the standby an operator rebuilds, without the logical slots the old one had.
void rebase_standby(const PgCluster& primary, PgCluster& standby);

// Waits until `standby` has replayed everything `primary` has written so far.
void wait_replayed(const PgCluster& primary, const PgCluster& standby);

}  // namespace pgoutbox::test
