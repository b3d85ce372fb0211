#!/usr/bin/env bash
# Fuzz the pgoutput decoder: scripts/fuzz.sh [SECONDS]   (default 60)
#
# Configures and builds the `fuzz` preset (clang, libFuzzer + ASan + UBSan, build/fuzz), then
# runs fuzz/decoder_fuzz for SECONDS on a scratch copy of the seed corpus fuzz/corpus/decoder,
# so the checked-in seeds stay small. Exits non-zero on a crash, sanitizer report, leak or
# timeout, and keeps the work directory with the reproducer; on success it is removed.
set -euo pipefail

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 [SECONDS]" >&2
  exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

cmake --preset fuzz
cmake --build --preset fuzz --target decoder_fuzz

work="$(mktemp -d "${TMPDIR:-/tmp}/pgoutbox-fuzz.XXXXXX")"
cp -R fuzz/corpus/decoder "$work/corpus"
mkdir "$work/artifacts"

status=0
# libFuzzer reports every corpus change; keep that in a log and show only its closing lines.
build/fuzz/fuzz/decoder_fuzz \
  -max_total_time="$seconds" \
  -timeout=10 \
  -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" \
  "$work/corpus" > "$work/fuzz.log" 2>&1 || status=$?
tail -n 12 "$work/fuzz.log"

if [[ $status -ne 0 ]]; then
  tail -n 80 "$work/fuzz.log" >&2
  echo "decoder_fuzz failed (exit $status); reproducer, corpus and log kept in $work" >&2
  echo "replay: build/fuzz/fuzz/decoder_fuzz $work/artifacts/<file>" >&2
  exit "$status"
fi
rm -rf "$work"
echo "decoder_fuzz: no findings in ${seconds}s"
