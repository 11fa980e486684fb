#!/usr/bin/env bash
# Installs the Debian packages kiln needs. Idempotent: packages already
# present are left alone. Needs root (or sudo).
#   scripts/install-deps.sh         # everything: kiln, its tests, benchmarks
#   scripts/install-deps.sh --run   # only what building and running kiln
#                                   # needs (README's command one)
set -euo pipefail

# Building kiln and running the example farm (its builds use the host's
# compiler and curl). libpq-dev: the state layer's PostgreSQL client;
# diffoscope: the reports of reproducibility checks (docs/release.md).
RUN_PACKAGES=(
  build-essential cmake ninja-build pkg-config git python3
  libssl-dev libsqlite3-dev libpq-dev liblzma-dev libzstd-dev xz-utils zstd
  libzmq3-dev cppzmq-dev
  libboost-dev libboost-program-options-dev libboost-system-dev
  nlohmann-json3-dev prometheus-cpp-dev libtomlplusplus-dev
  libgc-dev libgoogle-perftools-dev libseccomp-dev libcurl4-openssl-dev
  ccache curl
  diffoscope
)
# The tests and benchmarks: the oracle (Nix), a second compiler, the
# emulated platform, the browser, promtool, wrk, an S3 object store (Ceph's
# gateway: scripts/start-object-store.sh), a PostgreSQL server
# (scripts/start-postgres.sh).
TEST_PACKAGES=(
  clang-format libgtest-dev libgmock-dev libbenchmark-dev sqlite3
  nix-bin time help2man clang-14
  qemu-user-static gcc-aarch64-linux-gnu libc6-dev-arm64-cross
  prometheus chromium wrk
  radosgw ceph-mon ceph-osd
  postgresql
)

PACKAGES=("${RUN_PACKAGES[@]}")
case "${1:-}" in
  --run) ;;
  "") PACKAGES+=("${TEST_PACKAGES[@]}") ;;
  *) echo "usage: scripts/install-deps.sh [--run]" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
