#!/usr/bin/env bash
# The README's first command: sets up a bare machine, builds, and runs pgoutbox on the local
# embedded default — a throwaway Postgres and Kafka on loopback, started as the tests start
# them — with a demo writer creating orders and their outbox events in one transaction each.
# Prints a status line every second; at the end (Ctrl-C or --seconds) it compares what was
# committed with what Kafka holds. Ctrl-C leaves nothing running.
#
#   scripts/demo.sh [--seconds N] [--rate ORDERS_PER_SECOND]
set -euo pipefail

seconds=0
rate=50
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    *) echo "usage: $0 [--seconds N] [--rate ORDERS_PER_SECOND]" >&2; exit 2 ;;
  esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target pgoutbox pgoutbox-devenv

run_dir=$(mktemp -d /tmp/pgoutbox-demo-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$run_dir"
}
trap cleanup EXIT
interrupted=0
trap 'interrupted=1' INT TERM

devenv=build/release/tests/support/pgoutbox-devenv
$devenv --env-file "$run_dir/env" > "$run_dir/devenv.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 900); do
  [ -f "$run_dir/env" ] && break
  kill -0 "${pids[0]}" 2>/dev/null || { cat "$run_dir/devenv.log" >&2; echo "demo: the services failed to start" >&2; exit 1; }
  sleep 0.2
done
# shellcheck disable=SC1091
. "$run_dir/env"
echo "Postgres (wal_level=logical): $PGOUTBOX_PG_DSN"
echo "Kafka (KRaft, single node):   $PGOUTBOX_KAFKA_BOOTSTRAP"

psql() { command psql "$PGOUTBOX_PG_DSN" -X -q -v ON_ERROR_STOP=1 "$@"; }
psql -c "CREATE TABLE orders (id bigserial PRIMARY KEY, customer text NOT NULL, total numeric NOT NULL,
                              created_at timestamptz NOT NULL DEFAULT now())" \
     -f sql/outbox.sql -f sql/publication.sql

cat > "$run_dir/pgoutbox.yaml" <<EOT
postgres:
  dsn: "$PGOUTBOX_PG_DSN"
  slot: pgoutbox
  publication: pgoutbox
kafka:
  brokers: "$PGOUTBOX_KAFKA_BOOTSTRAP"
tables:
  - table: public.outbox
EOT
build/release/src/app/pgoutbox run -c "$run_dir/pgoutbox.yaml" > "$run_dir/pgoutbox.log" 2>&1 &
pids+=($!)

# The order service: each order and its event in one transaction, at the chosen rate.
psql -c "DO \$\$ BEGIN LOOP
  WITH o AS (INSERT INTO orders (customer, total) VALUES ('customer-' || (random() * 100)::int, round((random() * 500)::numeric, 2))
             RETURNING id, customer, total)
  INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
  SELECT 'Order', o.id::text, 'OrderCreated', jsonb_build_object('order_id', o.id, 'customer', o.customer, 'total', o.total) FROM o;
  COMMIT;
  PERFORM pg_sleep(1.0 / $rate);
END LOOP; END \$\$" > "$run_dir/writer.log" 2>&1 &
writer=$!
pids+=($writer)

status_line() {
  local orders events lag
  orders=$(psql -At -c "SELECT count(*) FROM orders")
  events=$($devenv count --bootstrap "$PGOUTBOX_KAFKA_BOOTSTRAP" --topic outbox.event.Order 2>/dev/null || echo 0)
  lag=$(psql -At -c "SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint
                     FROM pg_replication_slots WHERE slot_name = 'pgoutbox'")
  printf '\rorders written %-8s events in Kafka %-8s slot lag %-10s bytes' "$orders" "$events" "${lag:-?}"
  last_orders=$orders
  last_events=$events
}

started=$(date +%s)
echo "Writing $rate orders/s; Ctrl-C to finish."
while [ $interrupted -eq 0 ]; do
  status_line
  if [ "$seconds" -gt 0 ] && [ $(( $(date +%s) - started )) -ge "$seconds" ]; then break; fi
  kill -0 "${pids[1]}" 2>/dev/null || { echo; cat "$run_dir/pgoutbox.log" >&2; echo "demo: pgoutbox exited" >&2; exit 1; }
  sleep 1
done
trap - INT TERM

kill -TERM "$writer" 2>/dev/null || true
wait "$writer" 2>/dev/null || true
psql -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE 'DO %' AND pid <> pg_backend_pid()" >/dev/null
for _ in $(seq 1 60); do
  status_line
  [ "$last_events" -ge "$last_orders" ] && break
  sleep 1
done
echo
lost=$(( last_orders > last_events ? last_orders - last_events : 0 ))
echo "$last_orders orders committed, $last_events events in Kafka, $lost lost"
[ "$lost" -eq 0 ]
