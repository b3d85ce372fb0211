#!/usr/bin/env bash
# The benchmark in one command: sets up the machine, builds the release preset, and runs
# pgoutbox (at-least-once, exactly-once, the message outbox) against pg_recvlogical (the
# ceiling), Debezium (Kafka Connect standalone, defaults and tuned) and a polling relay on a
# throwaway Postgres 15 and Kafka, every scenario for every contender, then pgoutbox's scale
# curves, in one run.
# Prints the Markdown tables, writes them into bench/RESULTS.md and docs/benchmarks.md (between
# their markers), the headline table into README.md (between its own markers) and draws bench/results/*.png.
#
#   scripts/bench.sh [bench_compare options, e.g. --smoke, --polling-batch 2000]
#
# Against another commit, in the same run on the same machine:
#
#   scripts/bench.sh --baseline REV [bench_compare options, e.g. --contenders pgoutbox --no-scale]
#
# builds REV's pgoutbox in a worktree of its own, build/baseline-<commit> (kept, and reused by
# the next run against REV), and runs pgoutbox's contenders twice, this build and REV's, side by
# side; the tables label REV's "(baseline <commit>)" and add this build against it. Such a run
# writes its results (Markdown and JSON) to --out-dir (default build/bench-baseline-<commit>),
# not to bench/RESULTS.md, docs/benchmarks.md or README.md, and draws no chart.
#
# pgoutbox on the primary against pgoutbox on a hot standby of the same data (Postgres 17 from
# the npm server binaries; PGOUTBOX_TEST_PG_MAJOR=16 or 18 for another), its table written into
# docs/benchmarks.md between its own markers:
#
#   scripts/bench.sh --standby [bench_standby options, e.g. --events 500000, --smoke]
#
# pgoutbox into a topic whose max.message.bytes is far below librdkafka's batch.size, with and
# without oversized rows (dead-lettered), against the broker's default limit, in both delivery
# modes (bench/topic_limits.h), its table written into docs/benchmarks.md between its own markers:
#
#   scripts/bench.sh --topic-limits [bench_compare options, e.g. --events-10 500000, --smoke]
#
# The record formats' cost (format debezium-json with and without schemas, with the expanded
# payload) against format string on the same backlog drain (bench/formats.h), its table written
# into docs/benchmarks.md between its own markers:
#
#   scripts/bench.sh --formats [bench_compare options, e.g. --events-10 500000, --smoke]
#
# It then prints bench_format_cost's table: the same formats' CPU per record in one process.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

command="scripts/bench.sh${*:+ $*}"
baseline=""
standby=""
topic_limits=""
formats=""
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --standby) standby=1; shift ;;
    --topic-limits) topic_limits=1; shift ;;
    --formats) formats=1; shift ;;
    --baseline) baseline=${2:?--baseline needs a revision}; shift 2 ;;
    --baseline=*) baseline=${1#--baseline=}; shift ;;
    *) args+=("$1"); shift ;;
  esac
done

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
if [ -n "$standby" ]; then
  cmake --build --preset release -j "$(nproc)" --target pgoutbox bench_standby
  build/release/bench/bench_standby --command "$command" --readme "$root/docs/benchmarks.md" ${args[@]+"${args[@]}"}
  echo "bench: the standby table in docs/benchmarks.md"
  exit 0
fi
cmake --build --preset release -j "$(nproc)" --target pgoutbox bench_polling_relay bench_compare
if [ -n "$formats" ]; then
  build/release/bench/bench_compare --formats --command "$command" --readme "$root/docs/benchmarks.md" \
    ${args[@]+"${args[@]}"}
  echo "bench: the formats table in docs/benchmarks.md"
  # The same formats' CPU per record in one process, without Postgres and Kafka (its table is
  # copied into docs/benchmarks.md by hand).
  cmake --build --preset release -j "$(nproc)" --target bench_format_cost
  build/release/bench/bench_format_cost
  exit 0
fi
if [ -n "$topic_limits" ]; then
  build/release/bench/bench_compare --topic-limits --command "$command" --readme "$root/docs/benchmarks.md" \
    ${args[@]+"${args[@]}"}
  echo "bench: the topic limits table in docs/benchmarks.md"
  exit 0
fi

if [ -z "$baseline" ]; then
  build/release/bench/bench_compare --command "$command" --out-dir "$root/bench" --readme "$root/docs/benchmarks.md" \
    --headline "$root/README.md" \
    ${args[@]+"${args[@]}"}
  /usr/bin/python3 bench/chart.py bench/results/results.json bench/results
  echo "bench: tables in bench/RESULTS.md and docs/benchmarks.md, the headline in README.md, charts in bench/results/*.png"
  exit 0
fi

sha=$(git rev-parse --short "$baseline^{commit}")
tree="$root/build/baseline-$sha"
if [ ! -e "$tree/.git" ]; then
  git worktree add --detach "$tree" "$sha"
fi
git -C "$tree" checkout -q --detach "$sha"
# The worktree builds against this clone's dependencies (librdkafka, the brokers' jars): .deps is
# no part of a commit.
[ -e "$tree/.deps" ] || ln -s "$root/.deps" "$tree/.deps"
(cd "$tree" && cmake --preset release >/dev/null && cmake --build --preset release -j "$(nproc)" --target pgoutbox)

out_dir=()
case " ${args[*]-} " in
  *" --out-dir "* | *" --out-dir="*) ;;
  *) out_dir=(--out-dir "$root/build/bench-baseline-$sha") ;;
esac
build/release/bench/bench_compare --command "$command" ${out_dir[@]+"${out_dir[@]}"} \
  --baseline-pgoutbox "$tree/build/release/src/app/pgoutbox" --baseline-name "$sha" ${args[@]+"${args[@]}"}
echo "bench: against $sha, tables printed above and in ${out_dir[1]:-the --out-dir}, as its results Markdown file"
