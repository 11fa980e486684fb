#!/usr/bin/env bash
# kiln build -j N against nix-build -j N on examples/pkgset, same run, from
# empty stores each repetition: both sandboxed (kiln's `linux` plugin, Nix
# 2.8's sandbox), both seeing exactly the host paths host.nix declares, no
# substituters. Prints each wall time, the medians and kiln/nix.
#   bench/build_pkgset.sh            (REPS=3 JOBS=4 KILN=build/release/cli/kiln)
set -euo pipefail
cd "$(dirname "$0")/.."
KILN=${KILN:-build/release/cli/kiln}
REPS=${REPS:-3}
JOBS=${JOBS:-4}
set_dir=$(realpath examples/pkgset)
command -v nix-build >/dev/null || { echo "nix-build missing" >&2; exit 2; }
paths=$("$KILN" instantiate --readonly-mode --eval --strict --json \
  -E "(import $set_dir/host.nix).sandboxPaths" | tr -d '[]"' | tr ',' ' ')
work=$(mktemp -d /tmp/kiln-build-bench.XXXXXX)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
now() { date +%s.%N; }

run_kiln() {  # $1 = fresh state dir
  "$KILN" build --state-dir "$1" --no-out-link -j "$JOBS" \
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
: >"$work/kiln.t"; : >"$work/nix.t"
for i in $(seq "$REPS"); do
  t0=$(now); run_kiln "$work/k$i" || { cat "$work/kiln.err"; exit 1; }
  t1=$(now); run_nix "$work/n$i" || { cat "$work/nix.err"; exit 1; }
  t2=$(now)
  k=$(awk "BEGIN{print $t1 - $t0}"); n=$(awk "BEGIN{print $t2 - $t1}")
  echo "$k" >>"$work/kiln.t"; echo "$n" >>"$work/nix.t"
  printf 'rep %d: kiln build %.2f s, nix-build %.2f s\n' "$i" "$k" "$n"
done
km=$(median <"$work/kiln.t"); nm=$(median <"$work/nix.t")
printf 'median: kiln build -j%s %.2f s, nix-build -j%s %.2f s, kiln/nix %.2f\n' \
  "$JOBS" "$km" "$JOBS" "$nm" "$(awk "BEGIN{print $km / $nm}")"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
