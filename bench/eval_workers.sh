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
# KILN= runs another kiln binary; WORKERS="1 2 3" changes the worker counts,
# THREADS="1 2" the thread counts of `--threads` runs (threaded evaluation);
# GEN=collection uses gen-collection.py instead, GEN_ARGS passes options to
# the generator (e.g. "--deps 0"), NIX=0 leaves nix-instantiate out.
# With workers, kiln reports CPU times (KILN_EVAL_CPU_TIMES): the parent's
# before the fork plus the busiest worker's is the run's longest path, what
# its wall time would be on idle cores; its ratio to one process's CPU time
# is the speed-up the work's shape allows, whatever the load.
set -euo pipefail
N=${1:-50000}
REPS=${REPS:-3}
KILN=${KILN:-build/release/cli/kiln}
WORKERS=${WORKERS:-1 2}
THREADS=${THREADS:-1 2}
GEN=${GEN:-pkgset}
NIX=${NIX:-1}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export NIX_CONF_DIR=$work/nixconf
mkdir -p "$NIX_CONF_DIR" && echo "build-users-group =" >"$NIX_CONF_DIR/nix.conf"
if [ "$GEN" = collection ]; then
  python3 "${KILN_SHARED_DIR:-$here/../../shared}/bench/gen-collection.py" "$N" "$work/set" ${GEN_ARGS:-} >/dev/null
else
  python3 "$here/gen-pkgset.py" "$N" "$work/set" ${GEN_ARGS:-} >/dev/null
fi
set_file=$work/set/default.nix
run() {  # run NAME CMD...: time it; keep its .drv paths, sorted
  local name=$1 i=$2
  shift 2
  KILN_EVAL_CPU_TIMES=1 /usr/bin/time -f "$name %e %U %M %S" -o "$work/time.$name.$i" "$@" \
    >"$work/out.$name" 2>"$work/err.$name.$i"
  grep -o '/[^ "]*\.drv' "$work/out.$name" | sort -u >"$work/drv.$name"
}
best() { sort -k2 -n "$work"/time.$1.* | head -1; }  # by wall time
# Threads: CPU before the threads + the largest of one thread's CPU plus
# its waits for other threads' thunks (waits stretch when the machine is
# loaded, so this over-estimates the idle-core wall time); smallest over runs.
tcritical() {
  for f in "$work"/err.$1.*; do
    awk '/^kiln eval cpu: before threads/ {p = $6}
         /^kiln eval cpu: thread [0-9]/ {t = $5 + $8; if (t > m) m = t}
         END {printf "%.2f\n", p + m}' "$f"
  done | sort -n | head -1
}
# The smallest over the runs of NAME of: parent CPU + the busiest worker's.
critical() {
  for f in "$work"/err.$1.*; do
    awk '/^kiln eval cpu: parent/ {p = $5} /^kiln eval cpu: worker/ {if ($5 > w) w = $5}
         END {printf "%.2f\n", p + w}' "$f"
  done | sort -n | head -1
}
cpu() { sort -n <(for f in "$work"/time.$1.*; do awk '{printf "%.2f\n", $3 + $5}' "$f"; done) | head -1; }
ratio() { echo "scale=2; $1 / $2" | bc; }
echo "N=$N load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$REPS"); do
  run inproc "$i" "$KILN" eval --readonly-mode "$set_file"
  for w in $WORKERS; do run "w$w" "$i" "$KILN" eval --readonly-mode --workers "$w" "$set_file"; done
  for t in $THREADS; do run "t$t" "$i" "$KILN" eval --readonly-mode --threads "$t" "$set_file"; done
  if [ "$NIX" = 1 ]; then run nix "$i" nix-instantiate --readonly-mode "$set_file"; fi
done
echo "N=$N load after: $(cut -d' ' -f1-3 /proc/loadavg)"
ref=nix
[ "$NIX" = 1 ] || ref=inproc
for name in inproc $(printf 'w%s ' $WORKERS) $(printf 't%s ' $THREADS); do
  if ! cmp -s "$work/drv.$name" "$work/drv.$ref"; then
    echo "MISMATCH: kiln eval ($name) and nix-instantiate report different .drv paths"
    exit 1
  fi
done
echo "same $(wc -l <"$work/drv.$ref") .drv paths in every run"
read -r _ pw pu pm _ <<<"$(best inproc)"
pc=$(cpu inproc)
if [ "$NIX" = 1 ]; then
  read -r _ nw nu nm _ <<<"$(best nix)"
  echo "nix-instantiate      wall ${nw}s user ${nu}s rss $((nm / 1024)) MB"
fi
nixr() { [ "$NIX" = 1 ] && echo "$(ratio "$1" "$nw")x nix wall, "; }
echo "kiln one process     wall ${pw}s user ${pu}s cpu ${pc}s rss $((pm / 1024)) MB  ($(nixr "$pw"))"
for w in $WORKERS; do
  read -r _ ww wu wm _ <<<"$(best "w$w")"
  cp=$(critical "w$w")
  echo "kiln --workers $w     wall ${ww}s user ${wu}s rss $((wm / 1024)) MB  ($(nixr "$ww")speed-up" \
    "$(ratio "$pw" "$ww")x over one process; longest path ${cp}s cpu: $(ratio "$pc" "$cp")x on idle cores)"
done
for t in $THREADS; do
  read -r _ tw tu tm _ <<<"$(best "t$t")"
  cp=$(tcritical "t$t")
  echo "kiln --threads $t     wall ${tw}s user ${tu}s rss $((tm / 1024)) MB  ($(nixr "$tw")speed-up" \
    "$(ratio "$pw" "$tw")x over one process; longest path ${cp}s: $(ratio "$pc" "$cp")x on idle cores)"
done
set -- $THREADS
if [ $# -ge 2 ]; then
  read -r _ t1 _ _ <<<"$(best "t$1")"
  read -r _ t2 _ _ <<<"$(best "t$2")"
  echo "speed-up of --threads $2 over --threads $1: $(ratio "$t1" "$t2")x wall," \
    "$(ratio "$(tcritical "t$1")" "$(tcritical "t$2")")x longest path"
fi
set -- $WORKERS
if [ $# -ge 2 ]; then
  read -r _ w1 _ _ <<<"$(best "w$1")"
  read -r _ w2 _ _ <<<"$(best "w$2")"
  echo "speed-up of --workers $2 over --workers $1: $(ratio "$w1" "$w2")x"
fi
