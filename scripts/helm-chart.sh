#!/usr/bin/env bash
# The Helm chart's test (deploy/helm/pgoutbox): builds deploy/helm/validate (Helm, k8s.io/api and
# prometheus-operator's types as Go modules, one Go build) and runs it: helm lint --strict, helm
# template, a strict decode of every manifest into its API type and `pgoutbox config validate` on
# every rendered configuration, for each value set in deploy/helm/pgoutbox/ci/, and each set in
# ci/invalid/ refused. ctest runs it as ops_helm_chart_test.
#
#   scripts/helm-chart.sh [PGOUTBOX_BINARY] [validate's options...]
#   scripts/helm-chart.sh build/release/src/app/pgoutbox -values my-values.yaml -print
#
# Go's own module and build caches are used (shared by every clone on the machine: a rebuild
# takes seconds; the first build on a fresh machine about 3 minutes on 2 cores).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
binary=${1:-$root/build/release/src/app/pgoutbox}
shift || true

go=$(bash "$root/scripts/go.sh")
# Go keeps its caches under $HOME; without one (a bare service account), in the build tree.
if [ -z "${HOME:-}" ] && [ -z "${GOPATH:-}" ]; then export GOPATH=$root/.deps/go GOCACHE=$root/.deps/go/cache; fi
out="$root/build/helm-chart/pgoutbox-chart-validate"
mkdir -p "$(dirname "$out")"
start=$SECONDS
(cd "$root/deploy/helm/validate" && GOTOOLCHAIN=auto GOFLAGS=-mod=readonly "$go" build -o "$out" .)
echo "helm-chart: go build of deploy/helm/validate took $((SECONDS - start)) s"
exec "$out" -chart "$root/deploy/helm/pgoutbox" -alerts "$root/deploy/prometheus/alerts.yaml" -pgoutbox "$binary" "$@"
