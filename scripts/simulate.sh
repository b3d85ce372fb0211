#!/usr/bin/env bash
# The deterministic simulator of the relay core (docs/simulation.md), for long runs. CI runs a
# fixed 20,000 schedules per delivery mode (ctest -R sim_test); this explores any range of seeds.
#
#   scripts/simulate.sh --schedules 1000000            # both modes, seeds 1..1000000
#   scripts/simulate.sh --mode exactly-once --seed 5000 --schedules 100000
#   scripts/simulate.sh --mode exactly-once --seed 6600 --faults 1 --transactions 11   # replay one
#   scripts/simulate.sh --mutation 1                   # put defect 1 back (tests/sim/mutations) in a
#                                                      # copy of the tree and count the schedules
#                                                      # the simulator needs to find it
#
# Exits non-zero when a schedule fails; the failure is printed shrunk, with the arguments that
# replay it. PGOUTBOX_SIM_LOG=debug (or trace) shows the relay's log of a replayed schedule.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

mutation=""
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --mutation) mutation=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done

bash scripts/setup.sh
if [ -z "$mutation" ]; then
  cmake --preset release >/dev/null
  cmake --build --preset release --target pgoutbox_simulate
  exec build/release/tests/sim/pgoutbox_simulate "${args[@]}"
fi

patch_file="$root/tests/sim/mutations/defect$mutation.patch"
[ -f "$patch_file" ] || { echo "no such mutation: $patch_file" >&2; exit 2; }
copy="$root/build/mutation-$mutation"
rm -rf "$copy"
mkdir -p "$copy"
# The tracked tree (and the third-party sources), without any build directory.
tar -C "$root" --exclude=./build --exclude=./.git -cf - . | tar -C "$copy" -xf -
patch -d "$copy" -p1 --quiet < "$patch_file"
echo "defect $mutation put back:"
sed -n 's/^[-+][^-+]/  &/p' "$patch_file"
cmake -S "$copy" --preset release >/dev/null
cmake --build "$copy/build/release" --target pgoutbox_simulate
if [ ${#args[@]} -eq 0 ]; then args=(--mode exactly-once --schedules 100000); fi
if "$copy/build/release/tests/sim/pgoutbox_simulate" "${args[@]}"; then
  echo "defect $mutation was NOT found"
  exit 1
fi
echo "defect $mutation found (the count of schedules it took is the seed range above)"
