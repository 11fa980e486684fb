#!/bin/sh
# Benchmark (not a test) of the web front end on a big state database:
# bench/web_fill.sql fills a fresh state directory (the real schema, made by
# `kiln project create`) with 1,000,000 builds in 200 evaluations; then one
# `kiln scheduler --web-listen` serves it while a small farm runs beside it
# (one worker, a `live` jobset of short jobs), and `wrk` with 16 connections
# loads, one after the other, the overview, an evaluation page, its
# comparison, a build page and /api/ listings. Prints each page's p50/p99
# and requests/s, and the farm's dispatch latency and idle-with-work time
# (from /metrics) in a round without wrk and in a round during wrk, same
# run. Goal: p99 < 100 ms each; the farm's figures unchanged.
#   bench/web_bench.sh
# Environment: KILN (default build/release/cli/kiln), DURATION (seconds of
# wrk per page, default 10), JOBS (jobs per farm round, default 300).
# Needs root (the worker's --private-store), wrk and sqlite3
# (scripts/install-deps.sh).
set -eu
KILN=${KILN:-build/release/cli/kiln}
DURATION=${DURATION:-10}
JOBS=${JOBS:-300}
HERE=$(cd "$(dirname "$0")" && pwd)
for t in wrk sqlite3 curl; do
  command -v $t >/dev/null || { echo "$t not found (scripts/install-deps.sh)" >&2; exit 1; }
done
[ -x "$KILN" ] || { echo "kiln binary '$KILN' not found (set KILN)" >&2; exit 1; }
KILN=$(readlink -f "$KILN")
TMP=$(mktemp -d)
PIDS=
cleanup() {
  for p in $PIDS; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap "exit 1" INT TERM
S=$TMP/state
DB=$S/scheduler.sqlite
port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# ---- the database
"$KILN" project create live --state-dir "$S" >/dev/null
start=$(date +%s)
sqlite3 "$DB" <"$HERE/web_fill.sql" >/dev/null
echo "filled: $(sqlite3 "$DB" 'SELECT count(*) FROM builds') builds in" \
  "$(sqlite3 "$DB" 'SELECT count(*) FROM evaluations') evaluations," \
  "$(($(date +%s) - start)) s, $(du -m "$DB" | cut -f1) MB"
mkdir -p "$TMP/coll"
"$KILN" jobset create --project live live --location "$TMP/coll" \
  --check-interval 0 --state-dir "$S" >/dev/null

# ---- scheduler (with the web) and one worker
ZPORT=$(port)
WPORT=$(port)
"$KILN" scheduler --state-dir "$S" --listen "tcp://127.0.0.1:$ZPORT" \
  --insecure-plaintext --web-listen "127.0.0.1:$WPORT" >"$TMP/sched.log" 2>&1 &
PIDS="$!"
i=0
until grep -q " web http" "$TMP/sched.log"; do
  i=$((i + 1)); [ "$i" -gt 600 ] && { cat "$TMP/sched.log"; exit 1; }
  sleep 0.1
done
"$KILN" worker --connect "tcp://127.0.0.1:$ZPORT" --private-store \
  --state-dir "$TMP/worker" --worker-id bench-0 --slots 2 --sandbox none \
  --systems x86_64-linux --insecure-plaintext >"$TMP/worker.log" 2>&1 &
PIDS="$! $PIDS"
URL="http://127.0.0.1:$WPORT"
i=0
until curl -s "$URL/metrics" | grep -q '^kiln_workers 1'; do
  i=$((i + 1)); [ "$i" -gt 600 ] && { cat "$TMP/worker.log"; exit 1; }
  sleep 0.1
done

# The value of metric sample $1 in /metrics.
metric() { curl -s "$URL/metrics" | awk -v n="$1" '$1 == n { print $2 }'; }

# One farm round: JOBS new 0.2 s jobs evaluated and built; prints the mean
# dispatch latency (ms), idle-with-work slot time per dispatch (ms) and the
# longest loop turn seen so far (ms).
round() {
  {
    echo 'let mk = n: derivation { name = "j${toString n}"; system = "x86_64-linux";'
    echo "  builder = \"/bin/sh\"; args = [ \"-c\" \"sleep 0.2; echo $1 > \$out\" ]; }; in {"
    n=0
    while [ $n -lt "$JOBS" ]; do echo "  j$n = mk $n;"; n=$((n + 1)); done
    echo "}"
  } >"$TMP/coll/default.nix"
  d0=$(metric kiln_dispatch_latency_seconds_sum); c0=$(metric kiln_dispatch_latency_seconds_count)
  i0=$(metric kiln_slot_idle_with_work_seconds_sum)
  eval=$("$KILN" jobset eval --project live live --state-dir "$S" --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["eval"])')
  until [ "$(sqlite3 "$DB" "SELECT count(*) FROM builds WHERE eval = $eval AND finished = 0")" = 0 ]; do
    sleep 0.2
  done
  d1=$(metric kiln_dispatch_latency_seconds_sum); c1=$(metric kiln_dispatch_latency_seconds_count)
  i1=$(metric kiln_slot_idle_with_work_seconds_sum)
  echo "$d0 $d1 $c0 $c1 $i0 $i1 $(metric kiln_scheduler_loop_turn_max_seconds)" | awk '{
    n = $4 - $3; if (n < 1) n = 1
    printf "%d dispatches, dispatch latency mean %.2f ms, idle-with-work %.2f ms per dispatch, longest loop turn %.1f ms\n",
      n, ($2 - $1) * 1000 / n, ($6 - $5) * 1000 / n, $7 * 1000 }'
}

LAST=$(sqlite3 "$DB" "SELECT max(e.id) FROM evaluations e JOIN jobsets j ON j.id = e.jobset WHERE j.name = 'main'")
BUILD=$(sqlite3 "$DB" "SELECT max(id) FROM builds WHERE eval = $LAST")
PAGES="/ /eval/$LAST /eval/$LAST/compare /build/$BUILD /api/eval/$LAST /api/jobset/bench/main /api/queue /api/search?q=pkgs.job01"
for p in $PAGES; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "$URL$p")
  [ "$code" = 200 ] || { echo "$p answered $code" >&2; exit 1; }
done

echo "cpus: $(nproc), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "farm round without wrk: $(round a)"
round b >"$TMP/round-b" &
RP=$!
echo "page                          p50        p99   requests/s  (wrk -c16 -t2 -d${DURATION}s)"
for p in $PAGES; do
  wrk -t2 -c16 -d"${DURATION}s" --latency "$URL$p" >"$TMP/wrk"
  awk -v p="$p" '/^ +50%/ { p50 = $2 } /^ +99%/ { p99 = $2 }
    /Requests\/sec/ { rps = $2 } /Non-2xx/ { bad = $0 }
    END { printf "%-26s %9s %9s %10s %s\n", p, p50, p99, rps, bad }' "$TMP/wrk"
done
echo "load during: $(cut -d' ' -f1-3 /proc/loadavg)"
wait $RP
echo "farm round during wrk:  $(cat "$TMP/round-b")"
echo "farm round after wrk:   $(round c)"
