#!/bin/bash
# Evaluation benchmark (issue 3): gen-collection.py N, then
# `kiln instantiate --readonly-mode` (computes .drv paths, writes nothing) against
# `nix-instantiate --readonly-mode` on the same file, alternating REPS times.
# Prints wall/user time and peak RSS of each, the ratios, and checks that
# both print the same .drv paths. NICE=N runs both under `nice -n N`.
set -euo pipefail
N=${1:-100000}
REPS=${REPS:-3}
NICE=${NICE:-0}
KILN=${KILN:-build/release/cli/kiln}
SHARED=${KILN_SHARED_DIR:-$(dirname "$0")/../../shared}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$SHARED/bench/gen-collection.py" "$N" "$work/col" >/dev/null
export NIX_CONF_DIR=$work/nixconf
mkdir -p "$NIX_CONF_DIR" && echo "build-users-group =" >"$NIX_CONF_DIR/nix.conf"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$REPS"); do
  nice -n "$NICE" /usr/bin/time -f "kiln %e %U %M" -o "$work/time.k.$i" "$KILN" instantiate --readonly-mode "$work/col/default.nix" >"$work/k.out"
  nice -n "$NICE" /usr/bin/time -f "nix %e %U %M" -o "$work/time.n.$i" nix-instantiate --readonly-mode "$work/col/default.nix" >"$work/n.out" 2>/dev/null
done
if ! cmp -s <(sort "$work/k.out") <(sort "$work/n.out"); then echo "MISMATCH: .drv paths differ"; exit 1; fi
echo "same $(wc -l <"$work/k.out") .drv paths"
best() { sort -k2 -n "$work"/time.$1.* | head -1; }
read -r _ kw ku km <<<"$(best k)"
read -r _ nw nu nm <<<"$(best n)"
echo "kiln: wall ${kw}s user ${ku}s rss $((km / 1024)) MB"
echo "nix:  wall ${nw}s user ${nu}s rss $((nm / 1024)) MB"
echo "wall ratio kiln/nix: $(echo "scale=2; $kw / $nw" | bc)  user ratio: $(echo "scale=2; $ku / $nu" | bc)  rss ratio: $(echo "scale=2; $km / $nm" | bc)"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
