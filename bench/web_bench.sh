#!/bin/sh
# Benchmark (not a test) of the web front end on a big state database:
# bench/web_fill.sql fills a fresh state directory (the real schema, made by
# `kiln project create`) with 1,000,000 builds in 200 evaluations; then one
# `kiln scheduler --web-listen` serves it while a small farm runs beside it
# (one worker with SLOTS slots working through one evaluation of JOBS 0.2 s
# jobs in a `live` jobset, enough to keep every slot busy to the end), and
# `wrk` with 16 connections loads, one after the other, the overview, an
# evaluation page, its comparison, a build page and /api/ listings. Prints
# each page's p50/p99 and requests/s, and the farm's dispatch latency
# (count, mean, p50, p99) and idle-with-work time (from /metrics) in three
# phases of the same run: PHASE seconds before wrk, while wrk runs, PHASE
# seconds after. Goal: p99 < 100 ms each; the farm's figures unchanged.
#   bench/web_bench.sh
# Environment: KILN (default build/release/cli/kiln), DURATION (seconds of
# wrk per page, default 10), PHASE (seconds of the phases before and after
# wrk, default 60), SLOTS (the worker's slots, default 4), JOBS (the farm's
# jobs, default: what SLOTS slots can dispatch in the whole run, 5 × SLOTS
# a second, plus a quarter).
# WRK_NICE (default 10): wrk stands for clients on other machines, so it
# runs at the nice of the web's own threads: on a 2-core box it then takes
# CPU from the web server, as remote clients' requests do, and not from the
# scheduler's loop and the builds; WRK_NICE=0 lets it compete with them.
# DATABASE=postgres: the filled state is copied into a PostgreSQL started
# for the run (scripts/start-postgres.sh, `kiln db copy`), the scheduler
# runs with --database, and the pages are served by a `kiln web` front end
# of its own (the scheduler's web still serves /metrics). Default: sqlite.
# Needs root (the worker's --private-store), wrk and sqlite3
# (scripts/install-deps.sh); PostgreSQL for DATABASE=postgres.
set -eu
KILN=${KILN:-build/release/cli/kiln}
DURATION=${DURATION:-10}
PHASE=${PHASE:-60}
WRK_NICE=${WRK_NICE:-10}
SLOTS=${SLOTS:-4}
DATABASE=${DATABASE:-sqlite}
JOBS=${JOBS:-$(((2 * PHASE + 8 * DURATION + 30) * 5 * SLOTS * 5 / 4))}
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
  [ -d "$TMP/pg" ] && "$HERE/../scripts/start-postgres.sh" stop "$TMP/pg"
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
DBARGS=
# One SQL query's answer, from whichever database the farm uses.
sql() { sqlite3 "$DB" "$1"; }
if [ "$DATABASE" = postgres ]; then
  chmod 0755 "$TMP"  # the server runs as the postgres user
  PG_ENV=$("$HERE/../scripts/start-postgres.sh" "$TMP/pg" "$(port)")
  eval "$PG_ENV"
  export PGPASSFILE
  start=$(date +%s)
  "$KILN" db copy --from "$S" --to "$KILN_DATABASE_URL" 2>/dev/null | tail -1
  echo "copied into PostgreSQL in $(($(date +%s) - start)) s"
  mv "$DB" "$DB.copied"
  DBARGS="--database $KILN_DATABASE_URL"
  sql() { psql -qAt "$KILN_DATABASE_URL" -c "$1"; }
fi

# ---- scheduler (with the web) and one worker
ZPORT=$(port)
WPORT=$(port)
# shellcheck disable=SC2086
"$KILN" scheduler --state-dir "$S" $DBARGS --listen "tcp://127.0.0.1:$ZPORT" \
  --insecure-plaintext --web-listen "127.0.0.1:$WPORT" >"$TMP/sched.log" 2>&1 &
PIDS="$!"
i=0
until grep -q " web http" "$TMP/sched.log"; do
  i=$((i + 1)); [ "$i" -gt 600 ] && { cat "$TMP/sched.log"; exit 1; }
  sleep 0.1
done
"$KILN" worker --connect "tcp://127.0.0.1:$ZPORT" --private-store \
  --state-dir "$TMP/worker" --worker-id bench-0 --slots "$SLOTS" --sandbox none \
  --systems x86_64-linux --insecure-plaintext >"$TMP/worker.log" 2>&1 &
PIDS="$! $PIDS"
URL="http://127.0.0.1:$WPORT"
PAGE_URL=$URL
if [ "$DATABASE" = postgres ]; then
  FPORT=$(port)
  "$KILN" web $DBARGS --state-dir "$S" --listen "127.0.0.1:$FPORT" \
    >"$TMP/web.log" 2>&1 &
  PIDS="$! $PIDS"
  PAGE_URL="http://127.0.0.1:$FPORT"
  i=0
  until grep -q "^web http" "$TMP/web.log"; do
    i=$((i + 1)); [ "$i" -gt 600 ] && { cat "$TMP/web.log"; exit 1; }
    sleep 0.1
  done
fi
i=0
until curl -s "$URL/metrics" | grep -q '^kiln_workers 1'; do
  i=$((i + 1)); [ "$i" -gt 600 ] && { cat "$TMP/worker.log"; exit 1; }
  sleep 0.1
done

# Saves /metrics in file $1.
scrape() { curl -s "$URL/metrics" >"$1"; }

# The farm's figures between scrapes $1 and $2: dispatches, their dispatch
# latency (mean, and p50/p99 interpolated in the histogram's buckets as
# Prometheus' histogram_quantile does), idle-with-work slot time per
# dispatch and the p99 of its stretches, and the p99 loop turn.
figures() {
  python3 - "$1" "$2" <<'PY'
import math, sys
def load(path):
    out = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        key, value = line.rsplit(" ", 1)
        out[key] = float(value)
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
def delta(key):
    return b.get(key, 0.0) - a.get(key, 0.0)
def hist(name):
    pre = name + '_bucket{le="'
    buckets = sorted((math.inf if k[len(pre):-2] == "+Inf" else float(k[len(pre):-2]),
                      delta(k)) for k in b if k.startswith(pre))
    n, total = delta(name + "_count"), delta(name + "_sum")
    def quantile(q):
        if n <= 0:
            return math.nan
        rank, lo, below = q * n, 0.0, 0.0
        for le, c in buckets:
            if c >= rank:
                if le == math.inf:
                    return lo
                return lo + (le - lo) * (rank - below) / max(c - below, 1e-9)
            lo, below = le, c
        return lo
    return n, total, quantile(0.5), quantile(0.99)
n, s, p50, p99 = hist("kiln_dispatch_latency_seconds")
_, idle, _, idle99 = hist("kiln_slot_idle_with_work_seconds")
_, _, _, turn99 = hist("kiln_scheduler_loop_turn_seconds")
per = lambda x: x * 1000 / n if n else math.nan
print("%d dispatches, latency mean %.2f ms, p50 %.2f ms, p99 %.2f ms; "
      "idle-with-work %.2f ms per dispatch (stretch p99 %.2f ms); "
      "loop turn p99 %.2f ms"
      % (n, per(s), p50 * 1000, p99 * 1000, per(idle), idle99 * 1000,
         turn99 * 1000))
PY
}

# The farm's work for the whole run: JOBS new 0.2 s jobs in one evaluation
# of the `live` jobset, enough to keep every slot busy through the three
# phases (SLOTS slots dispatch at most 5 × SLOTS steps a second).
{
  echo 'let mk = n: derivation { name = "j${toString n}"; system = "x86_64-linux";'
  echo '  builder = "/bin/sh"; args = [ "-ec" "/bin/sleep 0.2; echo ${toString n} > $out" ]; }; in {'
  n=0
  while [ $n -lt "$JOBS" ]; do echo "  j$n = mk $n;"; n=$((n + 1)); done
  echo "}"
} >"$TMP/coll/default.nix"
# shellcheck disable=SC2086
LIVE=$("$KILN" jobset eval --project live live --state-dir "$S" $DBARGS --json |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["eval"])')
unfinished() {
  sql "SELECT count(*) FROM builds WHERE eval = $LIVE AND finished = 0"
}
echo "farm: $(unfinished) builds of 0.2 s queued for one worker with $SLOTS slots"
i=0
dispatched() {
  curl -s "$URL/metrics" |
    awk '$1 == "kiln_dispatch_latency_seconds_count" { n = int($2) } END { print n + 0 }'
}
until [ "$(dispatched)" -ge $((4 * SLOTS)) ]; do
  i=$((i + 1)); [ "$i" -gt 600 ] && { echo "the farm does not dispatch" >&2; exit 1; }
  sleep 0.1
done

LAST=$(sql "SELECT max(e.id) FROM evaluations e JOIN jobsets j ON j.id = e.jobset WHERE j.name = 'main'")
BUILD=$(sql "SELECT max(id) FROM builds WHERE eval = $LAST")
PAGES="/ /eval/$LAST /eval/$LAST/compare /build/$BUILD /api/eval/$LAST /api/jobset/bench/main /api/queue /api/search?q=pkgs.job01"
echo "page                       one request alone"
for p in $PAGES; do
  out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' "$PAGE_URL$p")
  [ "${out% *}" = 200 ] || { echo "$p answered ${out% *}" >&2; exit 1; }
  awk -v p="$p" -v t="${out#* }" 'BEGIN { printf "%-26s %8.2f ms\n", p, t * 1000 }'
done

echo "database: $DATABASE; cpus: $(nproc), wrk at nice $WRK_NICE, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
scrape "$TMP/m0"
sleep "$PHASE"
scrape "$TMP/m1"
echo "page                          p50        p99   requests/s  (wrk -c16 -t2 -d${DURATION}s)"
for p in $PAGES; do
  nice -n "$WRK_NICE" wrk -t2 -c16 -d"${DURATION}s" --latency "$PAGE_URL$p" >"$TMP/wrk"
  awk -v p="$p" '/^ +50%/ { p50 = $2 } /^ +99%/ { p99 = $2 }
    /Requests\/sec/ { rps = $2 } /Non-2xx/ { bad = $0 }
    END { printf "%-26s %9s %9s %10s %s\n", p, p50, p99, rps, bad }' "$TMP/wrk"
done
scrape "$TMP/m2"
echo "load during: $(cut -d' ' -f1-3 /proc/loadavg)"
sleep "$PHASE"
scrape "$TMP/m3"
left=$(unfinished)
failed=$(sql "SELECT count(*) FROM builds WHERE eval = $LIVE AND finished = 1 AND status <> 0")
echo "farm before wrk (${PHASE} s): $(figures "$TMP/m0" "$TMP/m1")"
echo "farm during wrk:        $(figures "$TMP/m1" "$TMP/m2")"
echo "farm after wrk (${PHASE} s):  $(figures "$TMP/m2" "$TMP/m3")"
if [ "$left" -eq 0 ]; then
  echo "warning: the farm ran out of work before the end (raise JOBS)" >&2
else
  echo "farm: $left builds still queued at the end (every phase had work)"
fi
echo "farm: $failed builds failed"
