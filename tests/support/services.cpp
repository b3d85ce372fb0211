#include "services.h"

namespace pgoutbox::test {

PgCluster& shared_postgres() {
  static PgCluster cluster;
  return cluster;
}

KafkaBroker& shared_kafka() {
  static KafkaBroker broker;
  return broker;
}

}  // namespace pgoutbox::test
