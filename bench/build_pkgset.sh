#!/usr/bin/env bash
# kiln build -j N against nix-build -j N on examples/pkgset, same run, from
# empty stores each repetition: both sandboxed (kiln's `linux` plugin, Nix
# 2.8's sandbox), both seeing exactly the host paths host.nix declares, no
# substituters. Prints each wall time, the medians and kiln/nix.
#   bench/build_pkgset.sh            (REPS=3 JOBS=4 KILN=build/release/cli/kiln)
# BASE=/path/to/an/older/kiln adds it as a third tool in the same run (a
# change's before and after, each against nix-build, under the same load).
# KILN_ARGS adds options to the measured kiln's builds (not BASE's), e.g.
# --fsync-store. BASE needs its plugins beside it, as in a build tree: copy
# an unchanged tree's build/release/cli/kiln to DIR/cli/kiln and its
# build/release/plugins/lib to DIR/plugins/lib, then BASE=DIR/cli/kiln.
# Each repetition also prints its own ratios; their medians are steadier
# than the ratio of medians when the machine's load drifts.
set -euo pipefail
cd "$(dirname "$0")/.."
KILN=${KILN:-build/release/cli/kiln}
BASE=${BASE:-}
KILN_ARGS=${KILN_ARGS:-}
REPS=${REPS:-3}
JOBS=${JOBS:-4}
set_dir=$(realpath examples/pkgset)
command -v nix-build >/dev/null || { echo "nix-build missing" >&2; exit 2; }
paths=$("$KILN" instantiate --readonly-mode --eval --strict --json \
  -E "(import $set_dir/host.nix).sandboxPaths" | tr -d '[]"' | tr ',' ' ')
work=$(mktemp -d /tmp/kiln-build-bench.XXXXXX)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
now() { date +%s.%N; }

run_kiln() {  # $1 = fresh state dir, $2 = BASE's binary instead of KILN
  local args=$KILN_ARGS; [ -n "${2:-}" ] && args=
  # shellcheck disable=SC2086  # the options' words on purpose
  "${2:-$KILN}" build --state-dir "$1" --no-out-link -j "$JOBS" $args \
    --sandbox-option "extra-paths=$paths" "$set_dir" >/dev/null 2>"$work/kiln.err"
}
run_nix() {  # $1 = fresh chroot store
  NIX_REMOTE= nix-build --store "$1" "$set_dir" --no-out-link -j "$JOBS" \
    --option sandbox true --option build-users-group "" \
    --option substituters "" --option sandbox-paths "$paths" \
    --option cores 1 >/dev/null 2>"$work/nix.err"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$work/kiln.t"; : >"$work/nix.t"; : >"$work/base.t"; : >"$work/kn.r"; : >"$work/kb.r"
for i in $(seq "$REPS"); do
  t0=$(now); run_kiln "$work/k$i" || { cat "$work/kiln.err"; exit 1; }
  t1=$(now); run_nix "$work/n$i" || { cat "$work/nix.err"; exit 1; }
  t2=$(now)
  k=$(awk "BEGIN{print $t1 - $t0}"); n=$(awk "BEGIN{print $t2 - $t1}")
  echo "$k" >>"$work/kiln.t"; echo "$n" >>"$work/nix.t"
  echo "$k $n" | awk '{print $1 / $2}' >>"$work/kn.r"
  line=$(printf 'rep %d: kiln build %.2f s, nix-build %.2f s' "$i" "$k" "$n")
  if [ -n "$BASE" ]; then
    t3=$(now); run_kiln "$work/b$i" "$BASE" || { cat "$work/kiln.err"; exit 1; }
    b=$(awk "BEGIN{print $(now) - $t3}"); echo "$b" >>"$work/base.t"
    echo "$k $b" | awk '{print $1 / $2}' >>"$work/kb.r"
    line+=$(printf ', base kiln %.2f s' "$b")
  fi
  line+=$(printf ' (kiln/nix %.2f' "$(tail -1 "$work/kn.r")")
  [ -n "$BASE" ] && line+=$(printf ', kiln/base %.2f' "$(tail -1 "$work/kb.r")")
  echo "$line)"
done
km=$(median <"$work/kiln.t"); nm=$(median <"$work/nix.t")
printf 'median: kiln build -j%s %.2f s, nix-build -j%s %.2f s, kiln/nix %.2f\n' \
  "$JOBS" "$km" "$JOBS" "$nm" "$(awk "BEGIN{print $km / $nm}")"
if [ -n "$BASE" ]; then
  bm=$(median <"$work/base.t")
  printf 'median: base kiln %.2f s, base/nix %.2f, kiln/base %.2f\n' \
    "$bm" "$(awk "BEGIN{print $bm / $nm}")" "$(awk "BEGIN{print $km / $bm}")"
fi
printf 'median of the repetitions'"'"' ratios: kiln/nix %.2f' "$(median <"$work/kn.r")"
[ -n "$BASE" ] && printf ', kiln/base %.2f' "$(median <"$work/kb.r")"
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
