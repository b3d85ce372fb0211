#!/usr/bin/env bash
# Mechanical checks, run by scripts/test.sh before the builds:
#   - clang-format: every C++ file of the project is formatted as .clang-format says;
#   - clang-tidy: the checks in .clang-tidy find nothing in src/ (run on the release build's
#     compile_commands.json; configures that build if needed).
#
#   scripts/lint.sh            # check (exit 1 on any finding)
#   scripts/lint.sh --fix      # reformat the files in place (clang-format only)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

mapfile -t files < <(git ls-files 'src/*' 'include/*' 'tests/*' 'examples/*' 'bench/*' 'fuzz/*' | grep -E '\.(cpp|h)$')

if [ "${1:-}" = "--fix" ]; then
  clang-format -i --style=file "${files[@]}"
  exit 0
fi

status=0
echo "lint: clang-format on ${#files[@]} files"
if ! clang-format --dry-run --Werror --style=file "${files[@]}" 2>/tmp/pgoutbox-format.$$; then
  grep -E '^[^ ].*: (error|warning):' /tmp/pgoutbox-format.$$ | cut -d: -f1 | sort -u | sed 's/^/  not formatted: /'
  echo "lint: run scripts/lint.sh --fix"
  status=1
fi
rm -f /tmp/pgoutbox-format.$$

if [ ! -f build/release/compile_commands.json ]; then cmake --preset release >/dev/null; fi
mapfile -t sources < <(git ls-files 'src/*.cpp')
echo "lint: clang-tidy on ${#sources[@]} files of src/"
# Generated headers (version.h) must exist before clang-tidy parses the sources.
cmake --build --preset release --target pgoutbox_common >/dev/null
if ! run-clang-tidy -p build/release -j "$(nproc)" -quiet "${sources[@]/#/$root/}" >/tmp/pgoutbox-tidy.$$ 2>&1; then
  grep -E '(warning|error):' /tmp/pgoutbox-tidy.$$ | sort -u | head -50
  echo "lint: clang-tidy found the above"
  status=1
fi
rm -f /tmp/pgoutbox-tidy.$$
[ $status -eq 0 ] && echo "lint: clean"
exit $status
