#!/bin/bash
# Parallel job evaluation (issue 12): gen-pkgset.py N (default 50000), then
# `kiln eval --readonly-mode` in one process, with --workers 1 and 2
# (evaluation threads on one heap), with --processes 1 and 2 (forked worker
# processes), and `nix-instantiate --readonly-mode` (the reference, one
# process) on the same file, alternating REPS times. Checks that every run
# reports the same .drv paths, prints the best wall/user time and peak RSS of
# each (RSS: the largest process, wait4), the speed-ups over one process and
# of 2 over 1, and the ratios to nix-instantiate. The load average is
# printed before and after: on a busy machine the speed-up of threads or
# processes that compete with others for the cores means little.
# KILN= runs another kiln binary; WORKERS="1 2 3" changes the thread counts,
# PROCESSES="1 2" the process counts ("" leaves them out); GEN=collection
# uses gen-collection.py instead, GEN=strings|overrides|files|scopes|byname
# bench/gen-GEN.py (eval_shapes.sh), GEN_ARGS passes options to the generator
# (e.g. "--deps 0" or "--shape layered"), NIX=0 leaves nix-instantiate out.
# kiln reports CPU times (KILN_EVAL_CPU_TIMES), so each run's longest path
# is known, what its wall time would be on idle cores, whatever the load:
# for threads, the CPU time before the threads plus the largest of one
# thread's CPU time and its waits for other threads' thunks; for processes,
# the parent's before the fork plus the busiest worker's. Its ratio to one
# process's CPU time is the speed-up the work's shape allows. For threads
# the line also gives the time all threads waited for others' thunks.
# PRIO=1 runs everything in a new session whose autogroup has nice -20, so
# on a machine shared with other work (builds) the runs get the cores they
# ask for and wall times mean something (root, or CAP_SYS_NICE; Linux
# autogroups: plain `nice` does not reach across sessions). PAIR=1 also
# runs two --workers 1 evaluations at once each repetition: twice one's
# wall time over the pair's is what two cores give two independent
# evaluations on this machine (memory bandwidth, page clearing, the
# hypervisor), the ceiling for two threads.
set -euo pipefail
if [ "${PRIO:-0}" = 1 ] && [ -z "${KILN_BENCH_PRIO:-}" ]; then
  export KILN_BENCH_PRIO=1
  exec setsid bash -c 'echo -20 >/proc/self/autogroup && exec "$0" "$@"' "$0" "$@"
fi
N=${1:-50000}
REPS=${REPS:-3}
KILN=${KILN:-build/release/cli/kiln}
WORKERS=${WORKERS-1 2}
PROCESSES=${PROCESSES-1 2}
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
  python3 "$here/gen-$GEN.py" "$N" "$work/set" ${GEN_ARGS:-} >/dev/null
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
         /^kiln eval cpu: thread [0-9]/ {t = $6 + $9; if (t > m) m = t}
         END {printf "%.2f\n", p + m}' "$f"
  done | sort -n | head -1
}
# Threads: the smallest over runs of the time all threads waited for other
# threads' thunks together (what a waiting thread leaves idle).
twaits() {
  for f in "$work"/err.$1.*; do
    awk '/^kiln eval cpu: thread [0-9]/ {w += $9} END {printf "%.2f\n", w}' "$f"
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
  for t in $WORKERS; do run "t$t" "$i" "$KILN" eval --readonly-mode --workers "$t" "$set_file"; done
  if [ "${PAIR:-0}" = 1 ]; then
    run pairA "$i" "$KILN" eval --readonly-mode --workers 1 "$set_file" &
    run pairB "$i" "$KILN" eval --readonly-mode --workers 1 "$set_file" &
    wait
  fi
  for w in $PROCESSES; do run "w$w" "$i" "$KILN" eval --readonly-mode --processes "$w" "$set_file"; done
  if [ "$NIX" = 1 ]; then run nix "$i" nix-instantiate --readonly-mode "$set_file"; fi
done
echo "N=$N load after: $(cut -d' ' -f1-3 /proc/loadavg)"
ref=nix
[ "$NIX" = 1 ] || ref=inproc
names=inproc
for t in $WORKERS; do names="$names t$t"; done
for w in $PROCESSES; do names="$names w$w"; done
[ "${PAIR:-0}" = 1 ] && names="$names pairA pairB"
for name in $names; do
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
# report FLAG PREFIX LONGEST COUNTS...: one line per count, then 2 over 1.
report() {
  local flag=$1 prefix=$2 longest=$3 n w u m cp waits
  shift 3
  for n in "$@"; do
    read -r _ w u m _ <<<"$(best "$prefix$n")"
    cp=$($longest "$prefix$n")
    waits=""
    [ "$prefix" = t ] && waits="; waits $(twaits "$prefix$n")s"
    printf 'kiln %-14s wall %ss user %ss rss %s MB  (%sspeed-up %sx over one process; longest path %ss: %sx on idle cores%s)\n' \
      "$flag $n" "$w" "$u" "$((m / 1024))" "$(nixr "$w")" "$(ratio "$pw" "$w")" "$cp" "$(ratio "$pc" "$cp")" "$waits"
  done
  if [ $# -ge 2 ]; then
    read -r _ w1 _ _ <<<"$(best "$prefix$1")"
    read -r _ w2 _ _ <<<"$(best "$prefix$2")"
    echo "speed-up of $flag $2 over $flag $1: $(ratio "$w1" "$w2")x wall," \
      "$(ratio "$($longest "$prefix$1")" "$($longest "$prefix$2")")x longest path"
  fi
}
report --workers t tcritical $WORKERS
if [ "${PAIR:-0}" = 1 ]; then
  # per repetition the later of the two; the smallest over repetitions
  pw=$(for i in $(seq "$REPS"); do cat "$work/time.pairA.$i" "$work/time.pairB.$i" | sort -k2 -n | tail -1; done | sort -k2 -n | head -1 | cut -d' ' -f2)
  read -r _ w1 _ _ <<<"$(best t1)"
  echo "two --workers 1 at once: wall ${pw}s; ceiling for two threads $(ratio "$(echo "2 * $w1" | bc)" "$pw")x"
fi
report --processes w critical $PROCESSES
