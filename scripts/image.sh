#!/usr/bin/env bash
# Builds the pgoutbox container image (docker/Dockerfile) without a Docker engine or a registry:
# podman and runc from Debian, and a base image made here from a debootstrapped Debian bookworm.
# Needs root (debootstrap, and podman's root storage), or sudo. Idempotent: the packages, the
# base images and podman's layer cache are reused; a rebuild with an unchanged binary takes
# seconds.
#
#   scripts/image.sh                  # localhost/pgoutbox:VERSION from build/release's binary
#   scripts/image.sh --binary PATH    # from another build of the binary
#   scripts/image.sh --from-source    # compiled inside the image, as `docker build` does (~10 min)
#   scripts/image.sh --tag NAME       # another name than localhost/pgoutbox:VERSION
#   scripts/image.sh --refresh-base   # debootstrap the base images again
#   scripts/image.sh podman ARGS…     # podman as configured here, e.g. podman run --rm IMAGE --version
#
# The base images come from http://deb.debian.org/debian, or the mirror PGOUTBOX_DEBIAN_MIRROR
# names (its debian-security beside it).
#
# By default the image takes the binary the host's release preset built (the Dockerfile's
# BINARY=context): the tests build that binary anyway, and compiling it again inside the image
# would cost CI about 10 minutes on two cores. Both are the same compiler and libraries
# (bookworm), and docker/runtime-packages.sh derives the runtime packages from the binary either
# way. Prints the image's size and the packages installed for the binary.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export CONTAINERS_CONF=$root/docker/containers.conf
podman() { "${sudo_cmd[@]}" env CONTAINERS_CONF="$CONTAINERS_CONF" podman "$@"; }

if [ "${1:-}" = podman ]; then
  shift
  exec "${sudo_cmd[@]}" env CONTAINERS_CONF="$CONTAINERS_CONF" podman "$@"
fi

binary=$root/build/release/src/app/pgoutbox
from=context
refresh_base=0
tag=""
while [ $# -gt 0 ]; do
  case $1 in
    --binary) binary=$(realpath "$2"); shift 2 ;;
    --from-source) from=source; shift ;;
    --refresh-base) refresh_base=1; shift ;;
    --tag) tag=$2; shift 2 ;;
    *) echo "usage: scripts/image.sh [--binary PATH | --from-source] [--tag IMAGE] [--refresh-base] | podman ARGS…" >&2; exit 2 ;;
  esac
done

version=$(sed -n 's/^project(pgoutbox VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
image=${tag:-localhost/pgoutbox:$version}
base=localhost/debian:bookworm
slim=localhost/debian:bookworm-slim
mirror=${PGOUTBOX_DEBIAN_MIRROR:-http://deb.debian.org/debian}
timings=()
timed() {
  local label=$1 start=$SECONDS
  shift
  "$@" || return
  timings+=("$label $((SECONDS - start)) s")
}

# --- podman, runc and debootstrap, as scripts/setup.sh installs its packages -----------------
packages=(podman runc debootstrap)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then missing+=("$p"); fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "image: installing ${missing[*]}"
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# --- the base images, from Debian's archive (no registry) -----------------------------------
# localhost/debian:bookworm is debootstrap's minbase variant (essential packages and apt: what
# the registry's debian:bookworm holds); localhost/debian:bookworm-slim is the same without
# documentation, manual pages and translations, and a dpkg configuration that keeps packages
# installed later from bringing them (as the registry's -slim image is made).
import_rootfs() { "${sudo_cmd[@]}" tar -C "$1" -c . | podman import --quiet - "$2" >/dev/null; }
make_base() {
  local work
  work=$(mktemp -d "${TMPDIR:-/tmp}/pgoutbox-image-base.XXXXXX")
  trap '"${sudo_cmd[@]}" rm -rf "$work"' EXIT
  local rootfs=$work/rootfs
  echo "image: debootstrap --variant=minbase bookworm ($mirror)"
  timed debootstrap "${sudo_cmd[@]}" debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  "${sudo_cmd[@]}" sh -eu -c '
    rootfs=$1 mirror=$2
    # The archive, its updates and the security archive, as the registry image lists them.
    rm -f "$rootfs/etc/apt/sources.list"
    cat > "$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    # What debootstrap leaves that a container must not inherit: the downloaded packages, the
    # package lists, the host name and resolver of this machine (podman provides its own).
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log \
      "$rootfs/etc/hostname" "$rootfs/etc/resolv.conf" "$rootfs/debootstrap"
    # apt in a container: no recommended packages, no cache kept.
    printf "APT::Install-Recommends \"false\";\nAPT::Install-Suggests \"false\";\nAcquire::Languages \"none\";\n" \
      > "$rootfs/etc/apt/apt.conf.d/90container"
    printf "DPkg::Post-Invoke { \"rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true\"; };\nBinary::apt::APT::Keep-Downloaded-Packages \"false\";\n" \
      > "$rootfs/etc/apt/apt.conf.d/90container-clean"
  ' sh "$rootfs" "$mirror"
  timed "import $base" import_rootfs "$rootfs" "$base"
  "${sudo_cmd[@]}" sh -eu -c '
    rootfs=$1
    cat > "$rootfs/etc/dpkg/dpkg.cfg.d/90container-slim" <<EOF
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
EOF
    find "$rootfs/usr/share/doc" -mindepth 1 -not -type d -not -name copyright -delete
    find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
    rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* "$rootfs"/usr/share/lintian/*
  ' sh "$rootfs"
  timed "import $slim" import_rootfs "$rootfs" "$slim"
  "${sudo_cmd[@]}" rm -rf "$work"
  trap - EXIT
}
# One maker at a time on a machine (two trees' tests may start together); the second finds the
# images made.
exec 9>"${TMPDIR:-/tmp}/pgoutbox-image-base.lock"
flock 9
if [ "$refresh_base" = 1 ] || ! podman image exists "$base" || ! podman image exists "$slim"; then
  make_base
else
  echo "image: $base and $slim present (scripts/image.sh --refresh-base makes them again)"
fi
exec 9>&-

# --- the image -------------------------------------------------------------------------------
if [ "$from" = context ]; then
  [ -x "$binary" ] || { echo "image: no binary at $binary: cmake --preset release && cmake --build --preset release" >&2; exit 1; }
  mkdir -p build/image
  strip --strip-unneeded -o build/image/pgoutbox "$binary"
  sh docker/runtime-packages.sh "$binary" > build/image/runtime-packages
fi
echo "image: building $image (binary from the $from stage)"
previous=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
timed "build $image" podman build --network host --file docker/Dockerfile --tag "$image" \
  --build-arg BASE=$base --build-arg RUNTIME_BASE=$slim --build-arg BINARY=$from .
# The image this tag named before, if the build replaced it (and no container still uses it).
if [ -n "$previous" ] && [ "$previous" != "$(podman image inspect --format '{{.Id}}' "$image")" ]; then
  podman rmi "$previous" >/dev/null 2>&1 || true
fi
size() { podman image inspect --format '{{.Size}}' "$1" | awk '{ printf "%.1f MB", $1 / 1e6 }'; }
echo "image: $image is $(size "$image") ($slim: $(size "$slim"))"
echo "image: packages installed for the binary: $(podman run --rm --network none --entrypoint cat "$image" \
  /usr/share/pgoutbox/runtime-packages | tr '\n' ' ')"
for t in "${timings[@]}"; do echo "image: took $t"; done
