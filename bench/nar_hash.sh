#!/bin/sh
# Benchmark: NAR-serialise and sha256-hash a ~1 GB tree with kiln and with
# nix-hash in the same run (warm page cache), and compare; also times one
# sha256 stream (openssl dgst) over the same NAR bytes held in tmpfs.
#   bench/nar_hash.sh [TREE]     (default /usr/lib/x86_64-linux-gnu)
# Environment: KILN (kiln binary, default build/release/cli/kiln), REPS
# (timed runs per tool, default 5), NICE (e.g. -10: run each timed command
# in a session of its own whose scheduler autogroup gets nice NICE, so that
# on a busy shared machine both tools get the cores as on an idle one; with
# autogroups a plain `nice` has no effect across sessions; needs root for
# negative values). Not a test: prints figures, fails only if
# the two hashes differ or a tool fails.
set -eu
TREE=${1:-/usr/lib/x86_64-linux-gnu}
KILN=${KILN:-build/release/cli/kiln}
REPS=${REPS:-5}
NICE=${NICE:-0}
command -v nix-hash >/dev/null || { echo "nix-hash not found" >&2; exit 1; }
[ -x "$KILN" ] || { echo "kiln binary '$KILN' not found (set KILN)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "tree: $TREE ($(du -sh "$TREE" 2>/dev/null | cut -f1), $(find "$TREE" | wc -l) objects)"
echo "cpus: $(nproc), nice $NICE, load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# Warm the page cache and check that both tools agree.
nix=$(nix-hash --type sha256 --base32 "$TREE")
kiln=$("$KILN" store hash --type sha256 --base32 "$TREE")
echo "nix-hash: $nix"
echo "kiln:     $kiln"
[ "$nix" = "$kiln" ] || { echo "HASH MISMATCH" >&2; exit 1; }

# Runs "$@" under /usr/bin/time (figures to $TMP/t), in its own session with
# the autogroup niced when NICE is set.
timed() {
  setsid -w sh -c '
    if [ "$1" != 0 ]; then
      echo "$1" > /proc/self/autogroup 2>/dev/null || true
      renice -n "$1" -p $$ >/dev/null
    fi
    shift
    exec /usr/bin/time -f "%e %M %U %S" "$@"' sh "$NICE" -o "$TMP/t" "$@" >/dev/null
}

# The floor: one sha256 stream over the same NAR bytes, read from tmpfs
# (openssl dgst, one thread, the same libcrypto kiln uses).
SHM=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$TMP" "$SHM"' EXIT
"$KILN" store dump "$TREE" >"$SHM/nar"
echo "NAR: $(stat -c %s "$SHM/nar") bytes; openssl: $(openssl dgst -sha256 "$SHM/nar" | cut -d' ' -f2)"

# Alternate the tools so that load changes hit all alike.
i=0
while [ "$i" -lt "$REPS" ]; do
  timed nix-hash --type sha256 --base32 "$TREE"
  cat "$TMP/t" >> "$TMP/nix"
  timed "$KILN" store hash --type sha256 --base32 "$TREE"
  cat "$TMP/t" >> "$TMP/kiln"
  timed openssl dgst -sha256 "$SHM/nar"
  cat "$TMP/t" >> "$TMP/sha"
  i=$((i + 1))
done

# Columns: wall s, peak RSS KB, user s, sys s. Report min and median wall.
summary() {
  sort -n "$1" | awk -v name="$2" '
    { wall[NR] = $1; if ($2 > rss) rss = $2; cpu[NR] = $3 + $4 }
    END {
      med = wall[int((NR + 1) / 2)]
      mincpu = cpu[1]; for (i = 2; i <= NR; i++) if (cpu[i] < mincpu) mincpu = cpu[i]
      printf "%-9s wall min %.2f s  median %.2f s  cpu(user+sys) min %.2f s  peak RSS %.1f MB\n",
        name, wall[1], med, mincpu, rss / 1024
      print wall[1], med > "/dev/stderr"
    }'
}
summary "$TMP/nix" nix-hash 2>"$TMP/nixw"
summary "$TMP/kiln" kiln 2>"$TMP/kilnw"
summary "$TMP/sha" sha256-nar 2>"$TMP/shaw"
awk 'NR == FNR { nmin = $1; nmed = $2; next }
     { printf "speed-up (nix-hash / kiln): min %.2fx  median %.2fx\n", nmin / $1, nmed / $2 }' \
  "$TMP/nixw" "$TMP/kilnw"
awk 'NR == FNR { smin = $1; smed = $2; next }
     { printf "kiln / sha256 of the NAR: min %.2fx  median %.2fx (goal <= 1.10)\n", $1 / smin, $2 / smed }' \
  "$TMP/shaw" "$TMP/kilnw"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
