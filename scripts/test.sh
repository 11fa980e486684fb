#!/usr/bin/env bash
# Installs dependencies; builds kiln with clang 14 in Release (preset
# clang-release) and runs that build's unit tests, so that a warning only
# one compiler emits fails here and not on a user's machine; then builds it
# with GCC (release preset) and runs the whole test suite. Both builds treat
# warnings as errors. The last line printed is the whole suite's ctest
# summary.
#   scripts/test.sh            # everything
#   scripts/test.sh -L unit    # extra arguments go to the whole suite's ctest
#   KILN_TEST_CLANG=0 scripts/test.sh   # skip the clang build
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [ "${KILN_TEST_CLANG:-1}" != 0 ]; then
  cmake --preset clang-release >/dev/null
  cmake --build --preset clang-release
  ctest --preset clang-release -L unit
fi
# The tests on: scripts/run-example.sh configures this folder without them.
cmake --preset release -DKILN_BUILD_TESTS=ON -DKILN_BUILD_BENCH=ON >/dev/null
cmake --build --preset release
ctest --preset release "$@"
