#!/usr/bin/env bash
# Prints the path of a Go toolchain that can build deploy/helm/validate (its go.mod's `go`
# line), installing one when there is none: the `go` on PATH or /usr/local/go/bin/go (the
# machine image's), else Debian's golang-go. An older Go (1.21 or later) fetches the toolchain
# the go.mod needs as a Go module itself (GOTOOLCHAIN), through the configured GOPROXY.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
want=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$root/deploy/helm/validate/go.mod")

find_go() {
  if command -v go >/dev/null; then command -v go
  elif [ -x /usr/local/go/bin/go ]; then echo /usr/local/go/bin/go
  fi
}
go=$(find_go)
if [ -z "$go" ]; then
  echo "go.sh: no Go toolchain; installing Debian's golang-go" >&2
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-go >&2
  go=$(find_go)
fi
have=$("$go" env GOVERSION | sed 's/^go//')
if [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -1)" != "$want" ]; then
  # Go 1.21 and later switch to the toolchain go.mod asks for when GOTOOLCHAIN allows it.
  if ! GOTOOLCHAIN=auto "$go" -C "$root/deploy/helm/validate" version >/dev/null 2>&1; then
    echo "go.sh: $go is Go $have; deploy/helm/validate needs Go $want (install it, or a Go >= 1.21 that can fetch it)" >&2
    exit 1
  fi

fi
echo "$go"
