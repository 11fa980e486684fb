#!/bin/bash
# Parallel job evaluation (issue 12): gen-pkgset.py N (default 50000), then
# `kiln eval --readonly-mode` in one process, with --workers 1 and with
# --workers 2, and `nix-instantiate --readonly-mode` (the reference, one
# process) on the same file, alternating REPS times. Checks that every run
# reports the same .drv paths, prints the best wall/user time and peak RSS of
# each (RSS: the largest process, wait4), the speed-ups of 2 workers over 1
# worker and over one process, and the ratios to nix-instantiate. The load
# average is printed before and after: on a busy machine the speed-up of
# processes that compete with others for the cores means little.
# KILN= runs another kiln binary; WORKERS="1 2 3" changes the worker counts.
set -euo pipefail
N=${1:-50000}
REPS=${REPS:-3}
KILN=${KILN:-build/release/cli/kiln}
WORKERS=${WORKERS:-1 2}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export NIX_CONF_DIR=$work/nixconf
mkdir -p "$NIX_CONF_DIR" && echo "build-users-group =" >"$NIX_CONF_DIR/nix.conf"
python3 "$here/gen-pkgset.py" "$N" "$work/set" >/dev/null
set_file=$work/set/default.nix
run() {  # run NAME CMD...: time it; keep its .drv paths, sorted
  local name=$1 i=$2
  shift 2
  /usr/bin/time -f "$name %e %U %M" -o "$work/time.$name.$i" "$@" >"$work/out.$name" 2>/dev/null
  grep -o '/[^ "]*\.drv' "$work/out.$name" | sort -u >"$work/drv.$name"
}
best() { sort -k2 -n "$work"/time.$1.* | head -1; }  # by wall time
ratio() { echo "scale=2; $1 / $2" | bc; }
echo "N=$N load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$REPS"); do
  run inproc "$i" "$KILN" eval --readonly-mode "$set_file"
  for w in $WORKERS; do run "w$w" "$i" "$KILN" eval --readonly-mode --workers "$w" "$set_file"; done
  run nix "$i" nix-instantiate --readonly-mode "$set_file"
done
echo "N=$N load after: $(cut -d' ' -f1-3 /proc/loadavg)"
for name in inproc $(printf 'w%s ' $WORKERS); do
  if ! cmp -s "$work/drv.$name" "$work/drv.nix"; then
    echo "MISMATCH: kiln eval ($name) and nix-instantiate report different .drv paths"
    exit 1
  fi
done
echo "same $(wc -l <"$work/drv.nix") .drv paths in every run"
read -r _ nw nu nm <<<"$(best nix)"
read -r _ pw pu pm <<<"$(best inproc)"
echo "nix-instantiate      wall ${nw}s user ${nu}s rss $((nm / 1024)) MB"
echo "kiln one process     wall ${pw}s user ${pu}s rss $((pm / 1024)) MB  ($(ratio "$pw" "$nw")x nix wall)"
for w in $WORKERS; do
  read -r _ ww wu wm <<<"$(best "w$w")"
  echo "kiln --workers $w     wall ${ww}s user ${wu}s rss $((wm / 1024)) MB  ($(ratio "$ww" "$nw")x nix wall," \
    "speed-up $(ratio "$pw" "$ww")x over one process)"
done
set -- $WORKERS
if [ $# -ge 2 ]; then
  read -r _ w1 _ _ <<<"$(best "w$1")"
  read -r _ w2 _ _ <<<"$(best "w$2")"
  echo "speed-up of --workers $2 over --workers $1: $(ratio "$w1" "$w2")x"
fi
