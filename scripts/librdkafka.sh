#!/usr/bin/env bash
# Builds the librdkafka pgoutbox links into .deps/librdkafka/<version> (a static library), once;
# run by scripts/setup.sh and by docker/Dockerfile's build stage. Needs the -dev packages that
# setup.sh installs (libssl, libsasl2, libcurl, libzstd, liblz4, zlib) and dpkg-dev.
#
#   scripts/librdkafka.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)

# librdkafka from Debian's own source package of a newer suite (bookworm's 2.0.2 lacks the SCRAM
# fix Kafka 4.x needs, OIDC and three years of producer fixes). A deb-src list of that one suite,
# used only by the apt-get calls below through their own lists directory, so the binary packages
# apt installs stay bookworm's. apt checks the Sources index against the suite's Release signature
# (debian-archive-keyring from bookworm carries the trixie keys) and the .dsc and tarballs against
# the index. Built once, as a static library: the binary then needs only Debian's shared libsasl2,
# libcurl, libssl, libzstd, liblz4 and zlib.
# shellcheck source=../third_party/librdkafka/source.env
. "$root/third_party/librdkafka/source.env"
rdkafka_prefix=$root/.deps/librdkafka/$LIBRDKAFKA_VERSION
if [ -f "$rdkafka_prefix/.built" ] && [ -f "$rdkafka_prefix/lib/librdkafka.a" ]; then
  echo "librdkafka.sh: librdkafka $LIBRDKAFKA_VERSION present ($rdkafka_prefix)"
else
  echo "librdkafka.sh: building librdkafka $LIBRDKAFKA_VERSION from Debian $LIBRDKAFKA_SUITE's source package"
  apt_dir=$root/.deps/librdkafka/apt
  mkdir -p "$apt_dir/sources.list.d" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
  printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$LIBRDKAFKA_SUITE" > "$apt_dir/$LIBRDKAFKA_SUITE-src.sources"
  apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/$LIBRDKAFKA_SUITE-src.sources"
    -o "Dir::Etc::SourceParts=$apt_dir/sources.list.d" -o "Dir::State::Lists=$apt_dir/lists"
    -o "Dir::Cache=$apt_dir/cache" -o APT::Sandbox::User=root)
  apt-get "${apt_opts[@]}" update -qq
  work=$(mktemp -d)
  # apt-get source unpacks with dpkg-source, which applies Debian's patches.
  (cd "$work" && apt-get "${apt_opts[@]}" source -qq "librdkafka=$LIBRDKAFKA_VERSION" >/dev/null)
  src=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'librdkafka-*')
  rm -rf "$rdkafka_prefix"
  # Only the C library (src/, not src-cpp/, examples or tests); every feature named so that a
  # missing -dev package fails here instead of building a librdkafka without it.
  (cd "$src" && ./configure --prefix="$rdkafka_prefix" --enable-ssl --enable-gssapi --enable-curl \
    --enable-zstd --enable-lz4-ext --enable-zlib --disable-debug-symbols >/dev/null &&
    make -s -j"$(nproc)" -C src >/dev/null && make -s -C src install >/dev/null)
  # Static linking only: the shared library goes; rdkafka-static.pc names librdkafka.a and the
  # shared libraries it needs.
  rm -f "$rdkafka_prefix"/lib/librdkafka.so* "$rdkafka_prefix"/lib/librdkafka-static.a
  cp "$src/LICENSES.txt" "$rdkafka_prefix/"
  rm -rf "$work"
  echo "$LIBRDKAFKA_SUITE $LIBRDKAFKA_VERSION" > "$rdkafka_prefix/.built"
fi
