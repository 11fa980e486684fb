#!/usr/bin/env bash
# Installs every Debian package kiln, its tests and its benchmarks need.
# Idempotent: packages already present are left alone. Needs root (or sudo).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git python3 clang-format
  libgtest-dev libgmock-dev libbenchmark-dev
  libssl-dev libsqlite3-dev sqlite3 liblzma-dev libzstd-dev xz-utils zstd
  libzmq3-dev cppzmq-dev
  libboost-dev libboost-program-options-dev libboost-system-dev
  nlohmann-json3-dev prometheus-cpp-dev libtomlplusplus-dev
  nix-bin
  time ccache
  help2man clang-14
  qemu-user-static gcc-aarch64-linux-gnu libc6-dev-arm64-cross
  libgc-dev libgoogle-perftools-dev
  curl
  prometheus
  chromium wrk
)

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
