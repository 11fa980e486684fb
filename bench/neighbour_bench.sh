#!/usr/bin/env bash
# Does a bomb slow down the build beside it? (issue 33: "the neighbour
# succeeds in its usual time, within 20 %".) `kiln build -j 2` in the
# `linux` sandbox with limits per build (root: cgroup v1 or v2) builds a
# CPU-bound neighbour alone, then beside each bomb: a memory bomb that asks
# for far more than the limit (default 50 GiB in 256 MiB pieces), a fork
# bomb, a disk fill, and for reference beside a copy of itself. The
# neighbour times its own work inside the sandbox (`date +%s%N` around a
# fixed loop), so scheduling and set-up do not count. Prints each
# repetition, the medians, and each case against alone and against twin.
#   sudo bench/neighbour_bench.sh     (REPS=5 KILN=build/release/cli/kiln)
# LIMITS overrides the limits (default: 256M memory, 128 processes, 64M
# build directory); BOMB_GIB the memory bomb's size.
set -euo pipefail
cd "$(dirname "$0")/.."
KILN=${KILN:-build/release/cli/kiln}
REPS=${REPS:-5}
BOMB_GIB=${BOMB_GIB:-50}
LIMITS=${LIMITS:---build-memory-max 256M --build-pids-max 128 --build-disk-max 64M}
[ "$(id -u)" = 0 ] || { echo "run as root (control groups)" >&2; exit 2; }
work=$(mktemp -d /tmp/kiln-neighbour-bench.XXXXXX)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# One collection per case, each with a salt so nothing is reused between
# repetitions; every builder uses the host's bash and coreutils.
collection() {  # $1 = case, $2 = salt
  cat <<EOF
let
  mk = name: script: derivation {
    inherit name; system = builtins.currentSystem;
    builder = "/bin/bash"; PATH = "/usr/bin:/bin";
    args = [ "-c" ("salt=$2; " + script) ];
  };
  neighbour = mk "neighbour" ''
    t0=\$(date +%s%N); i=0; while [ \$i -lt 300000 ]; do i=\$((i+1)); done
    t1=\$(date +%s%N); echo \$(( (t1 - t0) / 1000 )) > \$out'';
  bombs = {
    alone = [ ];
    twin = [ (mk "twin" "i=0; while [ \$i -lt 300000 ]; do i=\$((i+1)); done; echo > \$out") ];
    membomb = [ (mk "membomb" ''
      n=0; while [ \$n -lt $((BOMB_GIB * 4)) ]; do
        eval "v\$n=\$(head -c 268435456 /dev/zero | tr '\\\\000' a)"; n=\$((n+1)); done
      echo survived > \$out'') ];
    forkbomb = [ (mk "forkbomb" ''
      i=0; while [ \$i -lt 4000 ]; do (sleep 20 &) 2>/dev/null; i=\$((i+1)); done
      echo survived > \$out'') ];
    diskfill = [ (mk "diskfill" ''
      while :; do head -c 1048576 /dev/zero >> \$TMPDIR/fill || break; done
      echo survived > \$out'') ];
  };
in [ neighbour ] ++ bombs.$1
EOF
}

run_case() {  # $1 = case, $2 = rep; prints the neighbour's work in us
  local dir="$work/$1.$2"
  mkdir -p "$dir"
  collection "$1" "$1$2$$" >"$dir/default.nix"
  # shellcheck disable=SC2086  # LIMITS is a list of words on purpose
  "$KILN" build --state-dir "$dir/state" --no-out-link -j 2 --keep-going \
    --sandbox-option "extra-paths=/bin /usr/bin /lib /lib64 /usr/lib /etc/alternatives" \
    $LIMITS "$dir/default.nix" >"$dir/out" 2>"$dir/err" || true
  # The bombs fail, so kiln build prints no paths: find the neighbour's
  # output in the store.
  local out
  out=$(find "$dir/state/store" -maxdepth 1 -name '*-neighbour' -type f | head -1)
  [ -n "$out" ] || {
    echo "neighbour failed in case $1:" >&2; tail -20 "$dir/err" >&2; exit 1; }
  cat "$out"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
cases="alone twin membomb forkbomb diskfill"
for i in $(seq "$REPS"); do
  line="rep $i:"
  for c in $cases; do
    us=$(run_case "$c" "$i"); echo "$us" >>"$work/$c.t"
    line+=$(printf ' %s %.0f ms' "$c" "$(awk "BEGIN{print $us / 1000}")")
  done
  echo "$line"
done
# On a machine with few cores any second build takes CPU from the
# neighbour: beside/twin (an ordinary build of the same work) is what says
# whether a bomb hurts more than a neighbour build does.
alone=$(median <"$work/alone.t"); twin=$(median <"$work/twin.t")
for c in $cases; do
  m=$(median <"$work/$c.t")
  printf '%-9s median %.0f ms, beside/alone %.2f, beside/twin %.2f\n' "$c" \
    "$(awk "BEGIN{print $m / 1000}")" "$(awk "BEGIN{print $m / $alone}")" \
    "$(awk "BEGIN{print $m / $twin}")"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
