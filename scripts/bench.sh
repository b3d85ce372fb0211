#!/usr/bin/env bash
# The benchmark in one command: sets up the machine, builds the release preset, and runs
# pgoutbox (at-least-once, exactly-once, the message outbox) against pg_recvlogical (the
# ceiling), Debezium (Kafka Connect standalone, defaults and tuned) and a polling relay on a
# throwaway Postgres 15 and Kafka, every scenario for every contender, then pgoutbox's scale
# curves, in one run.
# Prints the Markdown tables, writes them into bench/RESULTS.md and README.md (between their
# markers) and draws bench/results/*.png.
#
#   scripts/bench.sh [bench_compare options, e.g. --smoke, --polling-batch 2000]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

bash scripts/setup.sh
# The chart's one extra package, for Debian's own python3.
if ! dpkg-query -W -f='${Status}' python3-matplotlib 2>/dev/null | grep -q 'install ok installed'; then
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends python3-matplotlib
fi

cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target pgoutbox bench_polling_relay bench_compare

build/release/bench/bench_compare --command "scripts/bench.sh${*:+ $*}" --out-dir "$root/bench" --readme "$root/README.md" "$@"
/usr/bin/python3 bench/chart.py bench/results/results.json bench/results
echo "bench: tables in bench/RESULTS.md and README.md, charts in bench/results/*.png"
