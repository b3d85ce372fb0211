#!/usr/bin/env bash
# The README's test command: sets up a bare machine, checks formatting and clang-tidy
# (scripts/lint.sh), fuzzes the pgoutput decoder for a bounded time (PGOUTBOX_FUZZ_SECONDS,
# default 60), then builds twice and runs every test once where it finds the most: under
# AddressSanitizer + UndefinedBehaviorSanitizer, except the tests labelled release-only (other
# Postgres majors and Kafka versions, packaging, the benchmark smoke), which run in the release
# build with the unit tests (those run in both builds: cheap, and the optimiser's code is not
# the sanitizers'). With arguments, both builds run the tests the arguments select.
#
#   scripts/test.sh            # everything (what CI runs)
#   scripts/test.sh -L unit    # extra arguments go to ctest, e.g. one label
#   scripts/test.sh -L long    # the cases left out by default (label long: repeats on more majors)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

bash scripts/setup.sh

jobs=$(nproc)
status=0
# Each step's header says how far into the run it starts, for finding where CI's time goes.
step() { printf '=== %s (at %dm%02ds)\n' "$1" $((SECONDS / 60)) $((SECONDS % 60)); }
# Lint and the fuzzer first, so that ctest's summary lines close the output.
if [ $# -eq 0 ]; then
  step "lint: clang-format, clang-tidy"
  bash scripts/lint.sh || status=1
  step "fuzz: pgoutput decoder"
  bash scripts/fuzz.sh "${PGOUTBOX_FUZZ_SECONDS:-60}" || status=1
fi
for preset in release asan; do
  step "build: $preset"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  step "test: $preset"
  # Tests labelled release-only (other Postgres majors, packaging, the benchmark smoke) run in
  # the release pass only: under ASan they would repeat code paths the other tests cover.
  # Tests labelled long (a case's repeat on more majors) run only when asked for: `-L long`.
  excluded=long
  if [[ " $* " == *long* ]]; then excluded=""; fi
  if [ "$preset" = asan ]; then excluded="${excluded:+$excluded|}release-only"; fi
  extra=()
  if [ -n "$excluded" ]; then extra=(-LE "$excluded"); fi
  # Without arguments, the release pass runs only what the ASan pass leaves out, and the unit tests.
  if [ $# -eq 0 ] && [ "$preset" = release ]; then extra+=(-L 'unit|release-only'); fi
  if ! ctest --preset "$preset" "${extra[@]}" "$@"; then
    status=1
  fi
done
exit $status
