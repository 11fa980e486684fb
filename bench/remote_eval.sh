#!/bin/bash
# Evaluations in the scheduler against evaluations on an evaluator host
# (issue 31), same run: for each N (default 10000 50000) a gen-pkgset.py
# collection is evaluated once by `kiln scheduler --evaluations local` and
# once by `kiln evaluator` + `kiln scheduler --evaluations remote`, each on
# a fresh PostgreSQL database (scripts/start-postgres.sh). Prints, per
# mode: the wall time of `kiln jobset eval` (request to recorded
# evaluation), the largest process on the scheduler's side (`/usr/bin/time
# %M` of the scheduler: itself or its `kiln eval` child), the scheduler's
# CPU time, and for remote mode the evaluator's peak, the result's size in
# the database, the evaluator's publish time and the scheduler's import.
# KILN= runs another kiln binary; PERF=FILE records the scheduler with perf
# into FILE.local and FILE.remote. Needs PostgreSQL (scripts/install-deps.sh).
set -euo pipefail
SIZES=${*:-10000 50000}
KILN=$(realpath "${KILN:-build/release/cli/kiln}")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
chmod 0755 "$work"  # the server runs as the postgres user
cleanup() {
  pkill -TERM -f "$work/" 2>/dev/null || true
  [ -d "$work/pg" ] && "$here/../scripts/start-postgres.sh" stop "$work/pg" >/dev/null 2>&1 || true
  if [ -n "${KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
eval "$("$here/../scripts/start-postgres.sh" "$work/pg" "$(port)")"
export PGPASSFILE
base=${KILN_DATABASE_URL%/*}
psql_() { "$("$here/../scripts/start-postgres.sh" check)/psql" -qAt "$@"; }

# Waits until file $1 contains $2 (up to 600 s).
wait_for() {
  for _ in $(seq 6000); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "timed out waiting for '$2' in $1" >&2; cat "$1" >&2; exit 1
}

# run MODE N: one evaluation of $work/set in mode MODE.
run() {
  local mode=$1 n=$2 db="farm_${1}_$2" d="$work/$1-$2"
  mkdir -p "$d"
  psql_ "$KILN_DATABASE_URL" -c "CREATE DATABASE $db"
  local url="$base/$db"
  "$KILN" project create demo --database "$url" >/dev/null
  "$KILN" jobset create --project demo main --location "$work/set" \
    --check-interval 0 --database "$url" >/dev/null
  /usr/bin/time -f "%e %U %S %M" -o "$d/sched.time" \
    ${PERF:+perf record -F 999 -g -o "$PERF.$mode" --} "$KILN" scheduler --state-dir "$d/s" --database "$url" \
    --listen tcp://127.0.0.1:* --insecure-plaintext --evaluations "$mode" \
    >"$d/sched.log" 2>&1 &
  local timepid=$!
  wait_for "$d/sched.log" "listening tcp://"
  local evalpid=""
  if [ "$mode" = remote ]; then
    /usr/bin/time -f "%e %U %S %M" -o "$d/eval.time" \
      "$KILN" evaluator --state-dir "$d/e" --database "$url" \
      >"$d/eval.log" 2>&1 &
    evalpid=$!
    wait_for "$d/eval.log" "waiting for work"
  fi
  local t0 t1
  t0=$(date +%s.%N)
  "$KILN" jobset eval --project demo main --json --timeout 3600 \
    --database "$url" >"$d/answer"
  t1=$(date +%s.%N)
  pkill -TERM -f "^$KILN scheduler --state-dir $d/s "
  wait "$timepid" || true
  if [ -n "$evalpid" ]; then pkill -TERM -P "$evalpid"; wait "$evalpid" || true; fi
  read -r _ su ss sm < <(tail -1 "$d/sched.time")
  printf 'N=%s %-6s jobset eval %.2f s; scheduler side: largest process %d MB, scheduler CPU %.2f s\n' \
    "$n" "$mode" "$(echo "$t1 - $t0" | bc)" $((sm / 1024)) "$(echo "$su + $ss" | bc)"
  if [ "$mode" = remote ]; then
    read -r _ eu es em < <(tail -1 "$d/eval.time")
    local bytes published
    bytes=$(grep -o 'from [^ ]* ([0-9]* bytes)' "$d/sched.log" | grep -o '[0-9]* bytes' | head -1)
    published=$(grep -o 'published evaluation result.*' "$d/eval.log" | head -1)
    printf 'N=%s remote evaluator: largest process %d MB, CPU %.2f s; result %s; %s\n' \
      "$n" $((em / 1024)) "$(echo "$eu + $es" | bc)" "$bytes" "$published"
  fi
  grep -h "imported evaluation result\|the result of evaluator" "$d/sched.log" | head -2 || true
}

for n in $SIZES; do
  rm -rf "$work/set"
  python3 "$here/gen-pkgset.py" "$n" "$work/set"
  echo "N=$n load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  run local "$n"
  run remote "$n"
  echo "N=$n load after: $(cut -d' ' -f1-3 /proc/loadavg)"
done
