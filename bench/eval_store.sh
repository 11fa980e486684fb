#!/bin/bash
# Writing an evaluation into a fresh store: gen-collection.py N, then
# `kiln instantiate FILE --state-dir FRESH` (every .drv registered in kiln's
# LocalStore, durably) against `nix-instantiate --store local?root=FRESH FILE`
# (a fresh Nix chroot store), and `kiln eval --json` (what the scheduler runs)
# into another fresh state directory, alternating REPS times, each into a
# new directory on the same filesystem ($TMPDIR). Prints wall/user/sys time
# of each, the ratios to nix, and checks both print the same .drv paths.
# NICE=N runs everything under `nice -n N`; BASE=/path/to/older/kiln also
# times that binary's `instantiate` in the same run (before/after figures).
set -euo pipefail
N=${1:-10000}
REPS=${REPS:-1}
NICE=${NICE:-0}
KILN=${KILN:-build/release/cli/kiln}
SHARED=${KILN_SHARED_DIR:-$(dirname "$0")/../../shared}
[ -d "$SHARED" ] || SHARED=/work/shared
work=$(mktemp -d)
cleanup() { chmod -R u+w "$work" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
python3 "$SHARED/bench/gen-collection.py" "$N" "$work/col" >/dev/null
export NIX_CONF_DIR=$work/nixconf
mkdir -p "$NIX_CONF_DIR" && echo "build-users-group =" >"$NIX_CONF_DIR/nix.conf"
col=$work/col/default.nix
# Every run gets a new directory and nothing is deleted until the end: ext4
# makes a file creation scan past inodes freed in the last ~30 s, so a store
# created right after another was removed pays for that removal.
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$REPS"); do
  sync
  nice -n "$NICE" /usr/bin/time -f "kiln %e %U %S" -o "$work/time.k.$i" \
    "$KILN" instantiate --state-dir "$work/ks.$i" "$col" >"$work/k.out" 2>/dev/null
  sync
  nice -n "$NICE" /usr/bin/time -f "eval %e %U %S" -o "$work/time.e.$i" \
    "$KILN" eval --json --state-dir "$work/ke.$i" "$col" >"$work/e.out"
  if [ -n "${BASE:-}" ]; then
    sync
    nice -n "$NICE" /usr/bin/time -f "base %e %U %S" -o "$work/time.b.$i" \
      "$BASE" instantiate --state-dir "$work/bs.$i" "$col" >/dev/null 2>&1
  fi
  sync
  nice -n "$NICE" /usr/bin/time -f "nix %e %U %S" -o "$work/time.n.$i" \
    nix-instantiate --store "local?root=$work/nx.$i" "$col" >"$work/n.out" 2>/dev/null
done
if ! cmp -s <(sort "$work/k.out") <(sort "$work/n.out"); then echo "MISMATCH: .drv paths differ"; exit 1; fi
echo "same $(wc -l <"$work/k.out") .drv paths; kiln eval printed $(wc -l <"$work/e.out") jobs"
echo "objects: kiln $(ls "$work/ks.1/store" | wc -l), nix $(ls "$work/nx.1/nix/store" | wc -l)"
echo "every run (tool wall user sys): $(cat "$work"/time.* | tr '\n' ';')"
best() { sort -k2 -n "$work"/time.$1.* | head -1; }
read -r _ kw ku ks <<<"$(best k)"
read -r _ ew eu es <<<"$(best e)"
read -r _ nw nu ns <<<"$(best n)"
echo "kiln instantiate: wall ${kw}s user ${ku}s sys ${ks}s"
echo "kiln eval --json: wall ${ew}s user ${eu}s sys ${es}s"
echo "nix-instantiate:  wall ${nw}s user ${nu}s sys ${ns}s"
if [ -n "${BASE:-}" ]; then
  read -r _ bw bu bs <<<"$(best b)"
  echo "BASE instantiate: wall ${bw}s user ${bu}s sys ${bs}s  (ratio to nix $(echo "scale=2; $bw / $nw" | bc))"
fi
echo "wall ratio instantiate/nix: $(echo "scale=2; $kw / $nw" | bc)  eval/nix: $(echo "scale=2; $ew / $nw" | bc)"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
