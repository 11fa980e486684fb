#!/bin/bash
# The evaluator on every shape of package set (issue 36): for each
# generator (default: pkgset strings overrides files scopes byname; SHAPES= picks)
# and each N (default 10000 50000), eval_pkgset.sh (kiln instantiate against
# nix-instantiate, same run: identical .drv paths, user time and peak RSS
# ratios) and eval_workers.sh (kiln eval --workers 1 against --workers 2).
# Goals: user time and peak RSS at most 0.5x of nix-instantiate's, and
# --workers 2 at least 1.6x over --workers 1, on every shape. REPS, KILN and
# NICE are passed on. At the end, one summary line per shape and N.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SHAPES=${SHAPES:-pkgset strings overrides files scopes byname}
SIZES=${*:-10000 50000}
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
for shape in $SHAPES; do
  for n in $SIZES; do
    echo "== $shape N=$n"
    out=$(GEN=$shape "$here/eval_pkgset.sh" "$n")
    echo "$out"
    ratios=$(echo "$out" | grep -o 'kiln/nix.*' | head -1)
    out=$(GEN=$shape WORKERS="1 2" PROCESSES="" NIX=0 "$here/eval_workers.sh" "$n")
    echo "$out"
    speedup=$(echo "$out" | grep -o 'speed-up of --workers 2 over --workers 1: [0-9.]*x wall' || true)
    echo "$shape N=$n: $ratios; ${speedup#speed-up of }" >>"$summary"
  done
done
echo "== summary"
cat "$summary"
