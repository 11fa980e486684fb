#!/usr/bin/env bash
# Installs dependencies, builds kiln (release preset) and runs the whole test
# suite. The last line printed is ctest's summary.
#   scripts/test.sh            # everything
#   scripts/test.sh -L unit    # extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release "$@"
