#!/usr/bin/env bash
# Installs dependencies, builds kiln and runs its main job on the bundled
# example collection: `kiln serve` starts a scheduler and two local workers,
# evaluates the collection and prints the builds as they finish, until
# Ctrl-C. Prints where to look when it is up. Needs root (the workers mount
# their own stores at /nix/store in private mount namespaces).
#   scripts/run-example.sh [COLLECTION]   (default: examples/hello)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release
collection="${1:-examples/hello}"
state="${KILN_STATE_DIR:-$PWD/.kiln-state}"
exec build/release/cli/kiln serve --state-dir "$state" "$collection"
