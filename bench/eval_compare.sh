#!/bin/bash
# Two kiln binaries on the same package sets (issue 12: what threaded
# evaluation's thunk state word costs one thread): gen-pkgset.py at each N
# given (default 10000 50000), `kiln eval --readonly-mode` with BASE= (the
# reference, e.g. main's build) and KILN= (default build/release/cli/kiln),
# alternating REPS times (default 2). Checks both print the same job lines,
# prints the best user time, wall time and peak RSS of each and the ratios
# KILN/BASE. GEN_ARGS= passes options to the generator ("--shape layered"),
# KILN_ARGS= to KILN only ("--workers 1").
set -euo pipefail
SIZES=${*:-10000 50000}
REPS=${REPS:-2}
KILN=${KILN:-build/release/cli/kiln}
BASE=${BASE:?BASE=path of the reference kiln binary}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
best() { sort -k3 -n "$work"/time.$1.* | head -1; }  # by user time
ratio() { echo "scale=3; $1 / $2" | bc; }
for n in $SIZES; do
  rm -rf "$work/set" "$work"/time.*
  python3 "$here/gen-pkgset.py" "$n" "$work/set" ${GEN_ARGS:-} >/dev/null
  echo "N=$n load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  for i in $(seq "$REPS"); do
    /usr/bin/time -f "base %e %U %M" -o "$work/time.b.$i" \
      "$BASE" eval --readonly-mode "$work/set/default.nix" >"$work/b.out" 2>/dev/null
    /usr/bin/time -f "kiln %e %U %M" -o "$work/time.k.$i" \
      "$KILN" eval --readonly-mode ${KILN_ARGS:-} "$work/set/default.nix" >"$work/k.out" 2>/dev/null
  done
  echo "N=$n load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  if ! cmp -s <(sort "$work/b.out") <(sort "$work/k.out"); then
    echo "N=$n MISMATCH: the job lines differ"
    exit 1
  fi
  read -r _ bw bu bm <<<"$(best b)"
  read -r _ kw ku km <<<"$(best k)"
  echo "N=$n same $(wc -l <"$work/k.out") job lines"
  echo "N=$n base: user ${bu}s wall ${bw}s rss $((bm / 1024)) MB"
  echo "N=$n kiln: user ${ku}s wall ${kw}s rss $((km / 1024)) MB"
  echo "N=$n kiln/base: user $(ratio "$ku" "$bu") wall $(ratio "$kw" "$bw") rss $(ratio "$km" "$bm")"
done
