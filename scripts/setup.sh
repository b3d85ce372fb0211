#!/usr/bin/env bash
# Installs everything pgoutbox's build, tests and demo need on a bare Debian 12 (bookworm)
# machine, non-interactively. Idempotent: a second run only checks and takes seconds.
#
#   scripts/setup.sh            # as root (CI) or with sudo available
#
# What it installs: compilers and CMake, the -dev packages of every library pgoutbox links,
# the PostgreSQL 15 server, a JDK and Maven, Prometheus (promtool), lintian, help2man and
# systemd-analyze for the deploy/ tests, and the Apache Kafka broker jars (pinned in
# third_party/kafka/pom.xml) into .deps/kafka/libs.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)

packages=(
  build-essential cmake ninja-build ccache pkg-config git ca-certificates procps psmisc
  clang libclang-rt-14-dev clang-format clang-tidy
  libpq-dev postgresql-15 postgresql-client-15
  librdkafka-dev libsimdjson-dev libboost-dev libspdlog-dev libfmt-dev libssl-dev
  prometheus-cpp-dev libgtest-dev libgmock-dev libyaml-cpp-dev libcli11-dev
  default-jdk-headless maven
  prometheus lintian help2man man-db systemd dpkg-dev fakeroot
  kcat curl
)

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  # Debian's postgresql-15 package would create and start a system cluster; tests start their
  # own throwaway clusters, so keep the package from creating one.
  if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
    "${sudo_cmd[@]}" mkdir -p /etc/postgresql-common
    echo "create_main_cluster = false" | "${sudo_cmd[@]}" tee /etc/postgresql-common/createcluster.conf >/dev/null
  fi
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: Debian packages present"
fi

# The Kafka broker's jars, from Maven Central, at the version pinned in the pom.
libs="$root/.deps/kafka/libs"
stamp="$libs/.pom.sha256"
want=$(sha256sum "$root/third_party/kafka/pom.xml" | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: fetching the Kafka broker jars"
  rm -rf "$libs"
  mkdir -p "$libs"
  mvn -B -q -f "$root/third_party/kafka/pom.xml" package -Dkafka.libs.dir="$libs"
  echo "$want" > "$stamp"
else
  echo "setup: Kafka broker jars present ($(ls "$libs" | grep -c '\.jar$') jars)"
fi
