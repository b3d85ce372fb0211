#!/usr/bin/env bash
# The README's first command: sets up a bare machine, builds, and runs pgoutbox on the local
# embedded default — a throwaway Postgres and Kafka on loopback, started as the tests do.
# Ctrl-C stops everything and leaves nothing running.
#
#   scripts/demo.sh [--seconds N]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target pgoutbox pgoutbox-devenv

run_dir=$(mktemp -d /tmp/pgoutbox-demo-XXXXXX)
devenv_pid=""
cleanup() {
  if [ -n "$devenv_pid" ] && kill -0 "$devenv_pid" 2>/dev/null; then
    kill -TERM "$devenv_pid" 2>/dev/null || true
    wait "$devenv_pid" 2>/dev/null || true
  fi
  rm -rf "$run_dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

build/release/tests/support/pgoutbox-devenv --env-file "$run_dir/env" "$@" &
devenv_pid=$!
for _ in $(seq 1 600); do
  [ -f "$run_dir/env" ] && break
  kill -0 "$devenv_pid" 2>/dev/null || { echo "demo: the services failed to start" >&2; exit 1; }
  sleep 0.2
done
# shellcheck disable=SC1091
. "$run_dir/env"

build/release/src/app/pgoutbox --version
cat <<EOT
Postgres (wal_level=logical): $PGOUTBOX_PG_DSN
Kafka (KRaft, single node):   $PGOUTBOX_KAFKA_BOOTSTRAP

Not there yet: the relay itself (pgoutbox run), the SQL in sql/, the order service and the
stock consumer. Until they land, this demo only brings up the services they will use.
Press Ctrl-C to stop.
EOT
wait "$devenv_pid"
