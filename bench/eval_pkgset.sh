#!/bin/bash
# Scaling benchmark (issue 12): gen-pkgset.py at each N given (default
# 10000 20000 50000), `kiln instantiate --readonly-mode` against
# `nix-instantiate --readonly-mode` on the same files, alternating REPS times.
# For each N: checks both print the same .drv paths, prints the best wall and
# user time and peak RSS of each and the kiln/nix ratios; at the end, kiln's
# user time per package at the largest N over the smallest (goal <= 1.3).
# KILN= runs another kiln binary; NICE=N runs both under `nice -n N`;
# GEN=strings|overrides|files|scopes|byname uses bench/gen-GEN.py (eval_shapes.sh).
set -euo pipefail
SIZES=${*:-10000 20000 50000}
REPS=${REPS:-3}
NICE=${NICE:-0}
KILN=${KILN:-build/release/cli/kiln}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export NIX_CONF_DIR=$work/nixconf
mkdir -p "$NIX_CONF_DIR" && echo "build-users-group =" >"$NIX_CONF_DIR/nix.conf"
best() { sort -k3 -n "$work"/time.$1.* | head -1; }  # by user time
ratio() { echo "scale=3; $1 / $2" | bc; }
first_n="" first_per=""
last_n="" last_per=""
for n in $SIZES; do
  rm -rf "$work/set" "$work"/time.*
  python3 "$here/gen-${GEN:-pkgset}.py" "$n" "$work/set"
  echo "N=$n load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  for i in $(seq "$REPS"); do
    nice -n "$NICE" /usr/bin/time -f "kiln %e %U %M" -o "$work/time.k.$i" \
      "$KILN" instantiate --readonly-mode "$work/set/default.nix" >"$work/k.out" 2>/dev/null
    nice -n "$NICE" /usr/bin/time -f "nix %e %U %M" -o "$work/time.n.$i" \
      nix-instantiate --readonly-mode "$work/set/default.nix" >"$work/n.out" 2>/dev/null
  done
  if ! cmp -s <(sort "$work/k.out") <(sort "$work/n.out"); then
    echo "N=$n MISMATCH: .drv paths differ"
    exit 1
  fi
  read -r _ kw ku km <<<"$(best k)"
  read -r _ nw nu nm <<<"$(best n)"
  per=$(echo "scale=3; $ku * 1000000 / $n" | bc)  # microseconds of user time per package
  echo "N=$n same $(wc -l <"$work/k.out") .drv paths"
  echo "N=$n kiln: wall ${kw}s user ${ku}s rss $((km / 1024)) MB (${per} us user/package)"
  echo "N=$n nix:  wall ${nw}s user ${nu}s rss $((nm / 1024)) MB"
  echo "N=$n ratios kiln/nix: wall $(ratio "$kw" "$nw") user $(ratio "$ku" "$nu") rss $(ratio "$km" "$nm")"
  echo "N=$n load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  if [ -z "$first_n" ]; then first_n=$n first_per=$per; fi
  last_n=$n last_per=$per
done
if [ "$first_n" != "$last_n" ]; then
  echo "kiln user time per package, N=$last_n over N=$first_n: $(ratio "$last_per" "$first_per")"
fi
