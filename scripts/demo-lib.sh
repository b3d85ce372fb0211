# What scripts/demo.sh and scripts/cutover-demo.sh share, sourced after they parse their options:
# the build, the children (each in its own session, stopped newest first), the throwaway Postgres
# and Kafka of pgoutbox-devenv, and psql. Expects `demo_name` (for messages), `build_dir` (empty:
# the release preset) and `run_dir`; sets `pids`, `sessions`, `devenv`, `devenv_pid`.
# shellcheck shell=bash

# Builds the targets; afterwards build_dir names the tree they are in.
demo_build() {
  if [ -z "$build_dir" ]; then
    cmake --preset release >/dev/null
    cmake --build --preset release --target "$@"
    build_dir=build/release
  else
    cmake --build "$build_dir" --target "$@"
  fi
  devenv=$build_dir/tests/support/pgoutbox-devenv
}

pids=()
sessions=()
# Newest first: the services finish cleanly while Postgres and Kafka are still there; then
# pgoutbox-devenv removes both.
stop_all() {
  local i pid
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid=${pids[i]}
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  pids=()
}

# Each child in its own session: Ctrl-C reaches only the script, which stops them in order.
start() {
  local log=$1; shift
  setsid "$@" > "$run_dir/$log" 2>&1 &
  pids+=($!)
  sessions+=($!)
}
alive_or_die() {
  local pid=$1 what=$2 log=$3
  if ! kill -0 "$pid" 2>/dev/null; then
    echo; echo "$demo_name: $what exited; the end of $log:" >&2; tail -n 20 "$run_dir/$log" >&2; exit 1
  fi
}

# Postgres and Kafka as the tests start them (extra arguments go to pgoutbox-devenv); waits for
# its env file and reads PGOUTBOX_PG_DSN and PGOUTBOX_KAFKA_BOOTSTRAP from it.
start_devenv() {
  echo "== starting Postgres and Kafka (as the tests do)"
  start devenv.log "$devenv" --env-file "$run_dir/env" "$@"
  devenv_pid=${pids[-1]}
  for _ in $(seq 1 900); do
    [ -f "$run_dir/env" ] && break
    alive_or_die "$devenv_pid" pgoutbox-devenv devenv.log
    sleep 0.2
  done
  # shellcheck disable=SC1091
  . "$run_dir/env"
}

psql_on() { local dsn=$1; shift; command psql "$dsn" -X -q -v ON_ERROR_STOP=1 "$@"; }
value_on() { psql_on "$1" -At -c "$2"; }
