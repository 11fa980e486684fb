#!/usr/bin/env bash
# Installs dependencies, builds kiln and runs its main job: the farm
# declared in examples/pkgset/kiln.toml (`kiln serve --config`), a scheduler
# and two local workers building the example collection in the linux
# sandbox. Prints the dashboard URL, a line per change in the builds and a
# summary (jobs, succeeded, failed, time) once they all finished, and keeps
# serving until Ctrl-C. Needs root (the workers mount their own stores at
# /nix/store in private mount namespaces).
#   scripts/run-example.sh [CONFIG]   (default: examples/pkgset/kiln.toml)
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what this command runs: kiln and its plugins (not the tests, which
# scripts/test.sh builds in the same folder).
scripts/install-deps.sh --run
cmake --preset release -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_BENCH=OFF >/dev/null
cmake --build --preset release --target kiln
config="${1:-examples/pkgset/kiln.toml}"
state="${KILN_STATE_DIR:-$PWD/.kiln-state}"
exec build/release/cli/kiln serve --state-dir "$state" --config "$config"
