#!/usr/bin/env bash
# Installs dependencies, builds kiln and runs its main job on the bundled
# example collection: `kiln serve` starts a scheduler and two local workers,
# evaluates the collection and prints the builds as they finish, until
# Ctrl-C. Prints where to look when it is up. Needs root (the workers mount
# their own stores at /nix/store in private mount namespaces).
#   scripts/run-example.sh [COLLECTION]   (default: examples/pkgset)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release
collection="${1:-examples/pkgset}"
state="${KILN_STATE_DIR:-$PWD/.kiln-state}"
args=()
# A collection declaring the host paths its builds need (its one impurity,
# host.nix's sandboxPaths) gets exactly those in each build's sandbox.
if [ -f "$collection/host.nix" ]; then
  paths=$(build/release/cli/kiln instantiate --readonly-mode --eval --strict \
    --json -E "(import $(realpath "$collection")/host.nix).sandboxPaths" |
    tr -d '[]"' | tr ',' ' ')
  echo "run-example: builds see these host paths read-only: $paths"
  args+=(--sandbox-option "extra-paths=$paths")
fi
exec build/release/cli/kiln serve --state-dir "$state" "${args[@]}" "$collection"
