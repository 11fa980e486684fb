#!/bin/bash
# ThreadSanitizer run of threaded evaluation (`kiln eval --workers N`,
# docs/evaluator.md "Parallel evaluation"). Build kiln with the tsan preset
# first (through the build gate on shared machines):
#   cmake --preset tsan && /work/bin/kbuild build/tsan kiln
#   KRUN=1 /work/bin/kbuild scripts/tsan-eval.sh [KILN]   # default build/tsan/cli/kiln
# Evaluates the threads tests' collections (tests/data/eval_threads: 403
# jobs with shared dependencies and two failing, and jobs in dependency
# cycles) and gen-pkgset.py 600 in both shapes,
# with 1, 2, 4 and 8 threads (NS="2 4 8" changes the counts); checks that
# every N prints what one thread prints (for the cycles: the same jobs
# failing with infinite recursion, whose traces may differ) and counts
# ThreadSanitizer reports. Exits 1 on any report or difference.
# KILN_NO_GC=1: Boehm stops threads with signals for its collections, which
# aborts under TSan; the collector's own concurrency is not what is tested.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
KILN=${1:-$here/build/tsan/cli/kiln}
NS=${NS:-2 4 8}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export KILN_NO_GC=1 KILN_STATE_DIR=$work/state
data=$here/tests/data/eval_threads
cp "$data/jobs.nix" "$data/cycle.nix" "$work/"
for shape in window layered; do
  python3 "$here/bench/gen-pkgset.py" 600 "$work/set-$shape" --shape "$shape" --core 100 >/dev/null
done
# The attribute of each job and whether it failed with infinite recursion.
recursion() {
  python3 -c 'import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    print(j["attr"], "infinite recursion encountered" in j.get("error", ""))' "$1"
}
status=0
for f in jobs.nix cycle.nix set-window/default.nix set-layered/default.nix; do
  tag=$(echo "$f" | tr '/' '_')
  for n in 1 $NS; do
    TSAN_OPTIONS="halt_on_error=0 report_signal_unsafe=0 history_size=4 log_path=$work/tsan.$tag.$n" \
      timeout 900 "$KILN" eval "$work/$f" --json --readonly-mode --workers "$n" \
      >"$work/out.$tag.$n" 2>"$work/err.$tag.$n"
    rc=$?
    reports=$(cat "$work"/tsan.$tag.$n.* 2>/dev/null | grep -c '^WARNING: ThreadSanitizer')
    if [ "$f" = cycle.nix ]; then
      cmp -s <(recursion "$work/out.$tag.$n") <(recursion "$work/out.$tag.1") && same=same || same=DIFFERENT
    else
      cmp -s "$work/out.$tag.$n" "$work/out.$tag.1" && same=same || same=DIFFERENT
    fi
    echo "$f --workers $n: exit $rc, $(grep -c . "$work/out.$tag.$n") jobs, $same as 1 thread, $reports reports"
    if [ "$reports" != 0 ]; then
      cat "$work"/tsan.$tag.$n.* | head -80
      status=1
    fi
    if [ "$rc" != 0 ] || [ "$same" != same ]; then status=1; fi
  done
done
exit $status
