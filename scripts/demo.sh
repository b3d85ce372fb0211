#!/usr/bin/env bash
# The README's first command: sets up a bare machine, builds, and runs the whole outbox system on
# loopback, then proves from real counts that every order took effect exactly once.
#
#   Postgres + Kafka   throwaway, started as the tests start them (pgoutbox-devenv)
#   order-service      orders and their outbox events, one transaction each      (database shop)
#   pgoutbox           the relay: shop's WAL -> Kafka topic outbox.event.order
#   stock-consumer     idempotent consumer group member: consumer_log + stock     (database stock)
#   reconcile          orders vs. stock movements: lost or applied twice?
#
# Timeline: everything runs for a phase, then Kafka is stopped for a phase (orders are still
# accepted; the backlog grows in Postgres), then Kafka comes back for a phase; then the orders
# stop, everything drains, and reconciliation prints "N orders, N applied, 0 lost, 0 applied
# twice". A status line shows orders written, events published, consumed, duplicates skipped,
# and lag. Ctrl-C at any point stops everything it started.
#
#   scripts/demo.sh [--rate ORDERS_PER_SECOND] [--phase-seconds N] [--build-dir DIR]
set -euo pipefail

rate=40
phase=20
build_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=$2; shift 2 ;;
    --phase-seconds) phase=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;  # an already configured build tree (default: the release preset)
    *) echo "usage: $0 [--rate ORDERS_PER_SECOND] [--phase-seconds N] [--build-dir DIR]" >&2; exit 2 ;;
  esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

demo_name=demo
# shellcheck source=scripts/demo-lib.sh
. scripts/demo-lib.sh
bash scripts/setup.sh --demo
demo_build pgoutbox pgoutbox-devenv order-service stock-consumer reconcile

run_dir=$(mktemp -d /tmp/pgoutbox-demo-XXXXXX)
# Every process the demo started runs in one of its children's sessions (Postgres and Kafka in
# pgoutbox-devenv's): after stopping, none of those sessions may have a process left.
leftovers() {
  local sid
  for sid in "${sessions[@]}"; do ps -o pid=,comm= --sid "$sid" 2>/dev/null || true; done
}
cleanup() {
  stop_all
  local left
  left=$(leftovers)
  if [ -n "$left" ]; then echo "demo: still running after stop:"; echo "$left"; else echo "stopped: nothing the demo started is running"; fi
  if [ "${PGOUTBOX_KEEP_DEMO:-0}" = 1 ]; then echo "logs kept in $run_dir"; else rm -rf "$run_dir"; fi
}
trap cleanup EXIT
trap 'echo; echo "interrupted: stopping everything"; exit 130' INT TERM

start_devenv --kafka-state-file "$run_dir/kafka-state"
shop_dsn="$PGOUTBOX_PG_DSN dbname=shop"
stock_dsn="$PGOUTBOX_PG_DSN dbname=stock"
echo "   Postgres: $PGOUTBOX_PG_DSN"
echo "   Kafka:    $PGOUTBOX_KAFKA_BOOTSTRAP"

echo "== applying sql/ to databases shop (orders + outbox) and stock (stock + consumer_log)"
psql_on "$PGOUTBOX_PG_DSN" -c "CREATE DATABASE shop" -c "CREATE DATABASE stock"
psql_on "$shop_dsn" -f examples/sql/shop.sql -f sql/outbox.sql -f sql/publication.sql
psql_on "$stock_dsn" -f examples/sql/stock.sql -f sql/consumer_log.sql \
  -c "INSERT INTO stock (sku, initial, available) SELECT 'SKU-' || g, 100000, 100000 FROM generate_series(1, 20) g"
"$devenv" create-topic --bootstrap "$PGOUTBOX_KAFKA_BOOTSTRAP" --topic outbox.event.order --partitions 3

# A checkpoint signing key, as a deployment keeps one (docs/delivery.md "Who can make pgoutbox skip").
(umask 077 && openssl rand -hex 32 > "$run_dir/checkpoint.key")
cat > "$run_dir/pgoutbox.yaml" <<EOT
postgres:
  dsn: "$shop_dsn"
  slot: pgoutbox
  publication: pgoutbox
  status_interval: 1s
kafka:
  brokers: "$PGOUTBOX_KAFKA_BOOTSTRAP"
tables:
  - table: public.outbox
checkpoint:
  signing_key_file: "$run_dir/checkpoint.key"
shutdown_timeout: 10s
log_format: json
EOT
echo "== starting pgoutbox, stock-consumer and order-service ($rate orders/s)"
start pgoutbox.log "$build_dir/src/app/pgoutbox" run -c "$run_dir/pgoutbox.yaml"
pgoutbox_pid=${pids[-1]}
start consumer.log "$build_dir/examples/stock-consumer/stock-consumer" --brokers "$PGOUTBOX_KAFKA_BOOTSTRAP" \
  --dsn "$stock_dsn" --backoff 1s,2s,5s,10s --stats-file "$run_dir/consumer.stats" \
  --kafka-property reconnect.backoff.max.ms=1000  # back within a second of Kafka (default: up to 10 s)
consumer_pid=${pids[-1]}
# The slot must exist before the first order: a logical slot decodes only what commits after
# its creation (an order written earlier would never be relayed; reconciliation would say so).
for _ in $(seq 1 300); do
  [ "$(value_on "$shop_dsn" "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pgoutbox'")" = 1 ] && break
  alive_or_die "$pgoutbox_pid" pgoutbox pgoutbox.log
  sleep 0.2
done
start orders.log "$build_dir/examples/order-service/order-service" --dsn "$shop_dsn" --rate "$rate"
orders_pid=${pids[-1]}

published=0
kafka_state() { cat "$run_dir/kafka-state" 2>/dev/null || echo "?"; }
interactive=0
[ -t 1 ] && interactive=1
ticks=0
status() {
  local label=$1 kafka orders consumed duplicates=0 count line
  kafka=$(kafka_state)
  # Published: the topic's end offsets. While Kafka is down (or stopping) nothing can be
  # published and the count can't be read: it stays where it was.
  if [ "$kafka" = up ]; then
    count=$("$devenv" count --bootstrap "$PGOUTBOX_KAFKA_BOOTSTRAP" --topic outbox.event.order 2>/dev/null || echo 0)
    [ "$count" -gt "$published" ] && published=$count
  fi
  # Read after the published count, so that backlog = orders - published is never negative;
  # whatever was consumed was published, even if the count above is from before an outage.
  consumed=$(value_on "$stock_dsn" "SELECT count(*) FROM consumer_log")
  [ "$consumed" -gt "$published" ] && published=$consumed
  orders=$(value_on "$shop_dsn" "SELECT count(*) FROM orders")
  [ -f "$run_dir/consumer.stats" ] && duplicates=$(sed -n 's/^duplicates=//p' "$run_dir/consumer.stats")
  line=$(printf '%-15s kafka %-4s | orders %6s | published %6s | consumed %6s | duplicates skipped %3s | backlog %5s | consumer lag %5s' \
    "$label" "$kafka" "$orders" "$published" "$consumed" "$duplicates" "$((orders - published))" "$((published - consumed))")
  if [ $interactive = 1 ]; then printf '\r%s\033[K' "$line"; elif [ $((ticks % 5)) -eq 0 ]; then echo "$line"; fi
  ticks=$((ticks + 1))
  last_orders=$orders
  last_published=$published
  last_consumed=$consumed
}
check_children() {
  alive_or_die "$pgoutbox_pid" pgoutbox pgoutbox.log
  alive_or_die "$consumer_pid" stock-consumer consumer.log
  alive_or_die "$devenv_pid" pgoutbox-devenv devenv.log
}
run_phase() {
  local label=$1 seconds=$2 until
  until=$(($(date +%s) + seconds))
  while [ "$(date +%s)" -lt "$until" ]; do
    check_children
    alive_or_die "$orders_pid" order-service orders.log
    status "$label"
    sleep 1
  done
  [ $interactive = 1 ] && echo
  return 0
}
wait_kafka() {
  local want=$1 label=$2
  for _ in $(seq 1 120); do
    [ "$(kafka_state)" = "$want" ] && return 0
    check_children
    status "$label"
    sleep 1
  done
  echo; echo "demo: Kafka did not become $want; see $run_dir/devenv.log" >&2; exit 1
}

echo "== 1/4 all running for ${phase}s"
run_phase "running" "$phase"
if [ "$last_orders" -eq 0 ]; then echo "demo: no order was written; the end of orders.log:" >&2; tail -n 5 "$run_dir/orders.log" >&2; exit 1; fi
echo "== 2/4 stopping Kafka for ${phase}s: orders are still accepted, their events wait in Postgres"
kill -USR1 "$devenv_pid"
wait_kafka down "stopping kafka"
run_phase "kafka down" "$phase"
echo "== 3/4 starting Kafka again: pgoutbox and the consumer catch up by themselves"
kill -USR2 "$devenv_pid"
wait_kafka up "starting kafka"
run_phase "recovering" "$phase"

echo "== 4/4 stopping the order service and draining"
kill -TERM "$orders_pid"
wait "$orders_pid" || true
tail -n 1 "$run_dir/orders.log"
for _ in $(seq 1 120); do
  check_children
  status "draining"
  [ "$last_consumed" -ge "$last_orders" ] && [ "$last_published" -ge "$last_orders" ] && break
  sleep 1
done
[ $interactive = 1 ] && echo
read -r handled applied duplicates rejected dead_lettered retries < <(
  . "$run_dir/consumer.stats"; echo "$handled $applied $duplicates $rejected $dead_lettered $retries")
echo "   consumer: $handled records handled, $applied applied, $duplicates duplicates skipped," \
     "$rejected rejected, $dead_lettered dead-lettered, $retries retries"

echo "== reconciliation: orders (shop) against stock movements (stock)"
set +e
"$build_dir/examples/reconcile/reconcile" --orders-dsn "$shop_dsn" --stock-dsn "$stock_dsn"
verdict=$?
set -e
exit $verdict
