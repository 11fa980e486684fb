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
  libgoogle-perftools-dev libseccomp-dev libcurl4-openssl-dev
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

# The Boehm collector kiln links: not Debian's libgc1 but Debian's own
# source of it (the same version, 8.2.2-3) built with mark bits in each
# build tree (cmake/KilnLibgc.cmake): Debian's build marks with one byte per
# 16-byte granule, ~8 % of the collector's heap in block headers
# (docs/evaluator.md, "Garbage collection"). Fetched once into LIBGC_SRC
# through a private source list (the system's apt configuration is left
# alone); apt checks the files' hashes against Debian's signed index.
LIBGC_VERSION=1:8.2.2-3
LIBGC_SRC=/usr/local/src/kiln-libgc-8.2.2-3

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

fetch_libgc_source() {
  if [ -f "$LIBGC_SRC/CMakeLists.txt" ] && [ -f "$LIBGC_SRC/debian/rules" ]; then
    return
  fi
  local tmp
  tmp=$(mktemp -d)
  mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial"
  echo 'deb-src http://deb.debian.org/debian bookworm main' >"$tmp/sources.list"
  # apt downloads as its own user where it has one.
  if id _apt >/dev/null 2>&1; then $SUDO chown -R _apt "$tmp"; fi
  local opts=(-o "Dir::Etc::SourceList=$tmp/sources.list"
    -o Dir::Etc::SourceParts=/dev/null -o "Dir::State::Lists=$tmp/lists"
    -o "Dir::Cache=$tmp/cache")
  echo "install-deps: fetching Debian's libgc $LIBGC_VERSION source into $LIBGC_SRC"
  $SUDO apt-get "${opts[@]}" update -qq
  if ! (cd "$tmp" && $SUDO apt-get "${opts[@]}" source --download-only -qq "libgc=$LIBGC_VERSION"); then
    # bookworm's index moved on (a point release): the same files from
    # Debian's pool or, once gone from it, its snapshot archive, checked
    # against their known hashes.
    echo "install-deps: $LIBGC_VERSION is not in bookworm's index; fetching its files directly"
    local base f
    for base in http://deb.debian.org/debian/pool/main/libg/libgc \
      https://snapshot.debian.org/archive/debian/20250520T000000Z/pool/main/libg/libgc; do
      for f in libgc_8.2.2-3.dsc libgc_8.2.2.orig.tar.gz libgc_8.2.2-3.debian.tar.xz; do
        $SUDO curl -fsSL --retry 3 -o "$tmp/$f" "$base/$f" || continue 2
      done
      break
    done
    (cd "$tmp" && sha256sum -c --quiet) <<'SUMS'
99eebbbf9f5a8fe659504f8cf7c26bc3a43fbe766d2c3b5ad3dfe8997a9a62ff  libgc_8.2.2-3.dsc
f30107bcb062e0920a790ffffa56d9512348546859364c23a14be264b38836a0  libgc_8.2.2.orig.tar.gz
cbd0266c8c355d122d6754a8640e54f42ce2dbe3912fc226980823e9bd0ae3b4  libgc_8.2.2-3.debian.tar.xz
SUMS
  fi
  # apt checked the hashes; dpkg-source checks them again and unpacks.
  $SUDO rm -rf "$LIBGC_SRC.new"
  $SUDO dpkg-source --no-check -x "$tmp"/libgc_*.dsc "$LIBGC_SRC.new" >/dev/null
  $SUDO rm -rf "$LIBGC_SRC"
  $SUDO mv "$LIBGC_SRC.new" "$LIBGC_SRC"
  $SUDO rm -rf "$tmp"
}

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  fetch_libgc_source
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fetch_libgc_source
echo "install-deps: done"
