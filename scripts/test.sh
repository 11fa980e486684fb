#!/usr/bin/env bash
# Installs dependencies, builds kiln (release preset, GCC) and runs the whole
# test suite; then builds it once more with clang 14 in Release (preset
# clang-release), so that a warning only one compiler emits fails here and
# not on a user's machine, and runs that build's unit tests. Both builds
# treat warnings as errors. The last line printed is the clang unit tests'
# ctest summary; the whole suite's comes before the clang build.
#   scripts/test.sh            # everything
#   scripts/test.sh -L unit    # extra arguments go to the first ctest
#   KILN_TEST_CLANG=0 scripts/test.sh   # skip the clang build
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release "$@"
if [ "${KILN_TEST_CLANG:-1}" != 0 ]; then
  cmake --preset clang-release >/dev/null
  cmake --build --preset clang-release
  ctest --preset clang-release -L unit
fi
