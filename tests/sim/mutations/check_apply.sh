#!/usr/bin/env bash
# Every defect under tests/sim/mutations must still apply to the tree (docs/simulation.md): a
# patch that no longer applies proves nothing, so CI fails the day a change moves its lines.
#   check_apply.sh SOURCE_ROOT
set -euo pipefail
root=${1:?usage: check_apply.sh SOURCE_ROOT}
cd "$root"
status=0
count=0
for patch in tests/sim/mutations/defect*.patch; do
  count=$((count + 1))
  if ! git apply --check "$patch" 2>/tmp/pgoutbox-mutation.$$; then
    echo "FAIL: $patch no longer applies: $(head -c 300 /tmp/pgoutbox-mutation.$$)"
    echo "      rewrite it against the current tree (the defect it puts back, in its new place)"
    status=1
  fi
done
rm -f /tmp/pgoutbox-mutation.$$
echo "$count mutation patches checked"
exit $status
