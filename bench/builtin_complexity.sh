#!/bin/bash
# Builtin complexity micro-benchmarks (issue 12): for each builtin family,
# one expression evaluated at a size n and at 10n by `kiln instantiate
# --eval --strict` and `nix-instantiate --eval --strict` in the same run.
# Prints each tool's user time at both sizes (best of REPS, minus the tool's
# start-up time), how much it grew (t(10n)/t(n): ~10 for linear work, ~100
# for quadratic, ~1 for work that does not depend on n), the kiln/nix
# ratio at 10n, and checks both tools print the same value.
# Usage: bench/builtin_complexity.sh [CASE...]   (default: every case)
set -euo pipefail
REPS=${REPS:-2}
KILN=${KILN:-build/release/cli/kiln}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export NIX_CONF_DIR=$work/nixconf
mkdir -p "$NIX_CONF_DIR" && echo "build-users-group =" >"$NIX_CONF_DIR/nix.conf"

# name | n | expression (@N@ is the size). `big` is a set of @N@ attributes.
CASES=$(cat <<'EOF'
intersectAttrs-small-big|5000|let big = builtins.listToAttrs (builtins.genList (i: { name = "a${toString i}"; value = i; }) @N@); small = { a1 = 1; a7 = 2; a99 = 3; b = 4; }; in builtins.foldl' (acc: i: acc + builtins.length (builtins.attrNames (builtins.intersectAttrs small big))) 0 (builtins.genList (i: i) 100000)
intersectAttrs-big-small|5000|let big = builtins.listToAttrs (builtins.genList (i: { name = "a${toString i}"; value = i; }) @N@); small = { a1 = 1; a7 = 2; a99 = 3; b = 4; }; in builtins.foldl' (acc: i: acc + builtins.length (builtins.attrNames (builtins.intersectAttrs big small))) 0 (builtins.genList (i: i) 100000)
update-big-small|5000|let big = builtins.listToAttrs (builtins.genList (i: { name = "a${toString i}"; value = i; }) @N@); in builtins.length (builtins.attrNames (builtins.foldl' (acc: i: acc // { "x${toString i}" = i; }) big (builtins.genList (i: i) 200)))
update-small-loop|50000|builtins.length (builtins.attrNames (builtins.foldl' (acc: i: acc // { "x${toString (i - i / 16 * 16)}" = i; }) { a = 1; } (builtins.genList (i: i) @N@)))
attrNames|5000|let big = builtins.listToAttrs (builtins.genList (i: { name = "a${toString i}"; value = i; }) @N@); in builtins.foldl' (acc: i: acc + builtins.length (builtins.attrNames big)) 0 (builtins.genList (i: i) 100)
attrValues-mapAttrs|5000|let big = builtins.listToAttrs (builtins.genList (i: { name = "a${toString i}"; value = i; }) @N@); in builtins.foldl' (acc: i: acc + builtins.length (builtins.attrValues (builtins.mapAttrs (n: v: v + i) big))) 0 (builtins.genList (i: i) 20)
listToAttrs|50000|builtins.length (builtins.attrNames (builtins.listToAttrs (builtins.genList (i: { name = "a${toString i}"; value = i; }) @N@)))
removeAttrs|5000|let big = builtins.listToAttrs (builtins.genList (i: { name = "a${toString i}"; value = i; }) @N@); in builtins.foldl' (acc: i: acc + builtins.length (builtins.attrNames (builtins.removeAttrs big [ "a1" "a5" "zz" ]))) 0 (builtins.genList (i: i) 100)
hasAttr-select|50000|let big = builtins.listToAttrs (builtins.genList (i: { name = "a${toString i}"; value = i; }) @N@); in builtins.foldl' (acc: i: acc + (if big ? "a${toString i}" then big."a${toString i}" else 0)) 0 (builtins.genList (i: i) @N@)
elem|5000|let l = builtins.genList (i: i) @N@; in builtins.length (builtins.filter (i: builtins.elem i l) (builtins.genList (i: i * 7) 4000))
concatLists|100000|builtins.length (builtins.concatLists (builtins.genList (i: [ i i ]) @N@))
concatMap|100000|builtins.length (builtins.concatMap (i: [ i (i + 1) ]) (builtins.genList (i: i) @N@))
append-loop|1000|builtins.length (builtins.foldl' (acc: i: acc ++ [ i ]) [ ] (builtins.genList (i: i) @N@))
genericClosure|20000|builtins.length (builtins.genericClosure { startSet = [ { key = 0; } ]; operator = x: if x.key < @N@ then [ { key = x.key + 1; } { key = x.key / 2; } ] else [ ]; })
sort-lambda|10000|builtins.head (builtins.sort (a: b: a < b) (builtins.genList (i: (i * 7919) - (i * 7919) / @N@ * @N@) @N@))
sort-lessThan|50000|builtins.head (builtins.sort builtins.lessThan (builtins.genList (i: (i * 7919) - (i * 7919) / @N@ * @N@) @N@))
groupBy|50000|builtins.length (builtins.attrNames (builtins.groupBy (x: toString (x - x / 100 * 100)) (builtins.genList (i: i) @N@)))
string-concat-loop|2000|builtins.stringLength (builtins.foldl' (acc: i: acc + "xyz") "" (builtins.genList (i: i) @N@))
string-interp-loop|2000|builtins.stringLength (builtins.foldl' (acc: i: "${acc}${toString i}") "" (builtins.genList (i: i) @N@))
concatStringsSep|50000|builtins.stringLength (builtins.concatStringsSep "," (builtins.genList (i: toString i) @N@))
replaceStrings|50000|builtins.stringLength (builtins.replaceStrings [ "a" "bc" ] [ "xx" "y" ] (builtins.concatStringsSep "" (builtins.genList (i: "abcd") @N@)))
substring-loop|10000|let s = builtins.concatStringsSep "" (builtins.genList (i: "abcd") @N@); in builtins.foldl' (acc: i: acc + builtins.stringLength (builtins.substring i 1 s)) 0 (builtins.genList (i: i) 2000)
EOF
)

usertime() {  # tool file -> "user_seconds value" (best of REPS)
  local tool=$1 file=$2 best="" out=""
  for _ in $(seq "$REPS"); do
    if [ "$tool" = kiln ]; then
      /usr/bin/time -f "%U" -o "$work/t" "$KILN" instantiate --eval --strict "$file" >"$work/out" 2>/dev/null
    else
      /usr/bin/time -f "%U" -o "$work/t" nix-instantiate --eval --strict "$file" >"$work/out" 2>/dev/null
    fi
    local t
    t=$(tail -1 "$work/t")
    if [ -z "$best" ] || [ "$(echo "$t < $best" | bc)" = 1 ]; then best=$t; fi
    out=$(cat "$work/out")
  done
  echo "$best $out"
}
sub() { local d; d=$(echo "$1 - $2" | bc); [ "$(echo "$d < 0.01" | bc)" = 1 ] && d=0.01; echo "$d"; }
div() { echo "scale=2; $1 / $2" | bc; }

echo "null" >"$work/null.nix"
read -r k0 _ <<<"$(usertime kiln "$work/null.nix")"
read -r n0 _ <<<"$(usertime nix "$work/null.nix")"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); start-up user time kiln ${k0}s nix ${n0}s (subtracted)"
printf "%-24s %7s | %-27s | %-27s | %s\n" case n "kiln t(n) t(10n) growth" "nix t(n) t(10n) growth" "kiln/nix at 10n"
status=0
while IFS='|' read -r name n expr; do
  if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$name"; then continue; fi
  declare -A t=()
  for size in "$n" "$((n * 10))"; do
    echo "${expr//@N@/$size}" >"$work/$name.$size.nix"
    read -r kt kv <<<"$(usertime kiln "$work/$name.$size.nix")"
    read -r nt nv <<<"$(usertime nix "$work/$name.$size.nix")"
    if [ "$kv" != "$nv" ]; then echo "$name n=$size: kiln printed '$kv', nix '$nv'"; status=1; fi
    t[k$size]=$(sub "$kt" "$k0")
    t[n$size]=$(sub "$nt" "$n0")
  done
  big=$((n * 10))
  printf "%-24s %7s | %6s %7s %10s | %6s %7s %10s | %s\n" "$name" "$n" \
    "${t[k$n]}" "${t[k$big]}" "$(div "${t[k$big]}" "${t[k$n]}")x" \
    "${t[n$n]}" "${t[n$big]}" "$(div "${t[n$big]}" "${t[n$n]}")x" \
    "$(div "${t[k$big]}" "${t[n$big]}")"
  unset t
done <<<"$CASES"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
