#pragma once

#include "kafka_broker.h"
#include "pg_cluster.h"

namespace pgoutbox::test {

// One Postgres and one Kafka per test binary, started on first use and torn down at exit.
// Tests that stop or crash a service must leave it running again when they end.
PgCluster& shared_postgres();
KafkaBroker& shared_kafka();

}  // namespace pgoutbox::test
