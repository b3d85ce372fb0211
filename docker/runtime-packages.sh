#!/bin/sh
# Prints, one per line, the Debian packages a pgoutbox image needs at run time: the package that
# owns each shared library `ldd BINARY` lists, plus ca-certificates (TLS to Kafka and Postgres
# verifies against the system's CAs). The image's runtime stage installs exactly this list, so it
# follows the binary when its libraries change (a dependency linked statically drops out, a new
# one comes in) without a list to keep in step by hand.
#
#   sh docker/runtime-packages.sh build/release/src/app/pgoutbox
#
# Run where the binary was linked (the Dockerfile's build stage, or the host for
# scripts/image.sh): dpkg knows only the packages installed there. Fails, naming the library,
# when a library comes from no Debian package (a project-local prefix such as .deps/): such a
# library must be linked statically, or the image would start without it.
set -eu

binary=${1:?usage: runtime-packages.sh BINARY}
listing=$(ldd "$binary") || { echo "runtime-packages: ldd $binary failed" >&2; exit 1; }
if printf '%s\n' "$listing" | grep -q 'not found'; then
  printf '%s\n' "$listing" | grep 'not found' >&2
  echo "runtime-packages: $binary cannot load the libraries above here either" >&2
  exit 1
fi

libraries=$(printf '%s\n' "$listing" | sed -n 's/^.* => \(\/[^ ]*\) (0x[0-9a-f]*)$/\1/p')
# dpkg records a file under the path its package shipped it at: with merged /usr, /lib/… and
# /usr/lib/… name the same file, and the name ldd prints may be a symlink the package ships or
# the file it points to. One dpkg-query for every candidate (it takes a while to start).
candidates() { real=$(readlink -f "$1"); printf '%s\n' "$1" "$real" "${real#/usr}" "/usr$1"; }
owners=$(for library in $libraries; do candidates "$library"; done | sort -u | xargs dpkg-query -S 2>/dev/null) || true

packages="ca-certificates"
missing=0
for library in $libraries; do
  owner=""
  for candidate in $(candidates "$library"); do
    owner=$(printf '%s\n' "$owners" | awk -v path="$candidate" '
      { at = index($0, ": "); if (substr($0, at + 2) == path) { split($0, p, /[:,]/); print p[1]; exit } }')
    [ -n "$owner" ] && break
  done
  if [ -z "$owner" ]; then
    echo "runtime-packages: no Debian package owns $library ($(readlink -f "$library")): link it statically" >&2
    missing=1
    continue
  fi
  packages="$packages
$owner"
done
[ "$missing" -eq 0 ] || exit 1
printf '%s\n' "$packages" | sort -u
