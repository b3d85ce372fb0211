#!/usr/bin/env bash
# The cutover from a polling relay to pgoutbox (docs/migrating.md "Switching from a polling relay"), run on
# loopback with the reference system of examples/, then proved row by row:
#
#   order-service   orders and their local_message rows (status NEW), one transaction each (shop)
#   outbox-poller   the relay before pgoutbox: NEW rows -> Kafka -> SENT, 50 per 500 ms, so under
#                   load it falls behind (a backlog of NEW rows: the usual reason to switch)
#   stock-consumer  the idempotent consumer; it runs through the cutover untouched        (stock)
#
# Steps: the poller relays under load; pgoutbox check, then pgoutbox run with backfill
# status = 'NEW' (every row still NEW in the slot's snapshot, then the stream); the poller runs on
# beside it for a while, then is killed with SIGKILL while it holds a published, unmarked batch;
# pgoutbox relays alone; the orders stop, everything drains, and `reconcile --cutover` prints,
# for every local_message row, whether its id is in the topic and how many times, by which relay.
#
#   scripts/cutover-demo.sh [--rate ORDERS_PER_SECOND] [--phase-seconds N] [--build-dir DIR]
set -euo pipefail

rate=150
phase=10
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

demo_name=cutover-demo
# shellcheck source=scripts/demo-lib.sh
. scripts/demo-lib.sh
bash scripts/setup.sh --demo
demo_build pgoutbox pgoutbox-devenv order-service outbox-poller stock-consumer reconcile

run_dir=$(mktemp -d /tmp/pgoutbox-cutover-XXXXXX)
cleanup() {
  stop_all
  if [ "${PGOUTBOX_KEEP_DEMO:-0}" = 1 ]; then echo "logs kept in $run_dir"; else rm -rf "$run_dir"; fi
}
trap cleanup EXIT
trap 'echo; echo "interrupted: stopping everything"; exit 130' INT TERM

start_devenv
shop_dsn="$PGOUTBOX_PG_DSN dbname=shop"
stock_dsn="$PGOUTBOX_PG_DSN dbname=stock"

echo "== databases shop (orders + local_message) and stock (stock + consumer_log)"
psql_on "$PGOUTBOX_PG_DSN" -c "CREATE DATABASE shop" -c "CREATE DATABASE stock"
psql_on "$shop_dsn" -f examples/sql/shop.sql -f examples/sql/local_message.sql
psql_on "$stock_dsn" -f examples/sql/stock.sql -f sql/consumer_log.sql \
  -c "INSERT INTO stock (sku, initial, available) SELECT 'SKU-' || g, 100000, 100000 FROM generate_series(1, 20) g"
"$devenv" create-topic --bootstrap "$PGOUTBOX_KAFKA_BOOTSTRAP" --topic outbox.event.order --partitions 3

echo "== before: order-service ($rate orders/s) -> local_message -> outbox-poller -> Kafka -> stock-consumer"
start consumer.log "$build_dir/examples/stock-consumer/stock-consumer" --brokers "$PGOUTBOX_KAFKA_BOOTSTRAP" \
  --dsn "$stock_dsn" --backoff 1s,2s,5s --stats-file "$run_dir/consumer.stats"
consumer_pid=${pids[-1]}
# linger.ms batches the poller's records the way a production poller does; it also keeps each
# batch published-but-unmarked for a moment, the window the SIGKILL below aims at.
start poller.log "$build_dir/examples/outbox-poller/outbox-poller" --dsn "$shop_dsn application_name=outbox-poller" \
  --brokers "$PGOUTBOX_KAFKA_BOOTSTRAP" --batch 50 --interval 500ms --kafka-property linger.ms=100
poller_pid=${pids[-1]}
start orders.log "$build_dir/examples/order-service/order-service" --dsn "$shop_dsn" --rate "$rate" \
  --event-table local_message
orders_pid=${pids[-1]}

status() {
  local label=$1
  printf '%-18s | orders %6s | local_message NEW %5s SENT %6s | consumed %6s\n' "$label" \
    "$(value_on "$shop_dsn" "SELECT count(*) FROM orders")" \
    "$(value_on "$shop_dsn" "SELECT count(*) FROM local_message WHERE status = 'NEW'")" \
    "$(value_on "$shop_dsn" "SELECT count(*) FROM local_message WHERE status = 'SENT'")" \
    "$(value_on "$stock_dsn" "SELECT count(*) FROM consumer_log")"
}
run_phase() {
  local label=$1 seconds=$2 until
  until=$(($(date +%s) + seconds))
  while [ "$(date +%s)" -lt "$until" ]; do
    alive_or_die "$consumer_pid" stock-consumer consumer.log
    alive_or_die "$orders_pid" order-service orders.log
    status "$label"
    sleep 2
  done
}
run_phase "poller" "$phase"

echo "== step 1: the publication, and pgoutbox check with backfill status = 'NEW' (the poller still runs)"
psql_on "$shop_dsn" -c "CREATE PUBLICATION pgoutbox FOR TABLE public.local_message WITH (publish = 'insert')"
cat > "$run_dir/pgoutbox.yaml" <<EOT
postgres:
  dsn: "$shop_dsn"
  slot: pgoutbox
  publication: pgoutbox
  status_interval: 1s
kafka:
  brokers: "$PGOUTBOX_KAFKA_BOOTSTRAP"
tables:
  - table: public.local_message
    backfill:
      where: "status = 'NEW'"
      order_by: created_at
# pgoutbox.lsn on streamed records: reconcile tells them from the backfill's (which have none).
provenance_headers: true
shutdown_timeout: 10s
log_format: json
EOT
"$build_dir/src/app/pgoutbox" check -c "$run_dir/pgoutbox.yaml" | sed 's/^/   /'
# Every row SENT now was SENT before the slot's snapshot: pgoutbox will not publish it. Only the
# rows the poller publishes from here on can be doubled.
sent_before=$(value_on "$shop_dsn" "SELECT count(*) FROM local_message WHERE status = 'SENT'")

echo "== step 2: pgoutbox run: the backfill from the slot's snapshot, then the stream"
start pgoutbox.log "$build_dir/src/app/pgoutbox" run -c "$run_dir/pgoutbox.yaml"
pgoutbox_pid=${pids[-1]}
for _ in $(seq 1 600); do
  [ "$(value_on "$shop_dsn" "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pgoutbox_backfilled'")" = 1 ] && break
  alive_or_die "$pgoutbox_pid" pgoutbox pgoutbox.log
  sleep 0.2
done
grep -o 'backfill done: [^;]*' "$run_dir/pgoutbox.log" | sed 's/^/   /' || true
run_phase "poller + pgoutbox" $((phase / 2))

echo "== step 3: kill -9 the poller while it holds a published, unmarked batch"
for _ in $(seq 1 500); do
  # idle in transaction: the batch is claimed and being published (or published, not committed)
  [ "$(value_on "$shop_dsn" "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'outbox-poller' AND state = 'idle in transaction'")" = 1 ] && break
done
kill -KILL "$poller_pid"
wait "$poller_pid" 2>/dev/null || true
run_phase "pgoutbox" "$phase"

echo "== step 4: stop the orders, drain, reconcile"
kill -TERM "$orders_pid"
wait "$orders_pid" || true
tail -n 1 "$run_dir/orders.log"
orders=$(value_on "$shop_dsn" "SELECT count(*) FROM orders")
for _ in $(seq 1 120); do
  [ "$(value_on "$stock_dsn" "SELECT count(*) FROM consumer_log")" -ge "$orders" ] && break
  alive_or_die "$pgoutbox_pid" pgoutbox pgoutbox.log
  sleep 1
done
status "drained"
# shellcheck disable=SC1091
read -r handled applied duplicates < <(. "$run_dir/consumer.stats"; echo "$handled $applied $duplicates")
echo "   consumer: $handled records handled, $applied applied, $duplicates duplicates skipped (by id)"
set +e
"$build_dir/examples/reconcile/reconcile" --cutover --orders-dsn "$shop_dsn" --brokers "$PGOUTBOX_KAFKA_BOOTSTRAP" \
  --stock-dsn "$stock_dsn" --max-listed 3 | tee "$run_dir/reconcile.out"
verdict=${PIPESTATUS[0]}
set -e
by_poller=$(sed -n 's/.*published by the poller \([0-9]*\),.*/\1/p' "$run_dir/reconcile.out")
echo "   the poller published $((by_poller - sent_before)) rows after pgoutbox's check: the most that can be doubled"
exit "$verdict"
