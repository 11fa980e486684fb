#!/bin/sh
# Benchmark: `nix copy --from` of a ~1 GiB closure out of kiln's HTTP
# binary cache (kiln scheduler --web-listen) against the same closure out
# of a file:// cache written by `nix copy --to file://`, in the same run,
# each into a fresh throwaway store (local?root=...).
#   bench/bincache_copy.sh [SRC]   (default /usr/lib/x86_64-linux-gnu)
# The closure: the entries of SRC of at least 1 MiB (no symlinks), added
# with `kiln store add` until LIMIT_MB. Environment: KILN (default
# build/release/cli/kiln), REPS (timed runs per side, default 3),
# COMPRESSION (kiln's --cache-compression, default zstd), FILE_COMPRESSION
# (the file:// cache's, default xz: Nix's default), LIMIT_MB (default
# 1024). Not a test: prints figures; fails only if a copy fails.
set -eu
SRC=${1:-/usr/lib/x86_64-linux-gnu}
KILN=${KILN:-build/release/cli/kiln}
REPS=${REPS:-3}
COMPRESSION=${COMPRESSION:-zstd}
FILE_COMPRESSION=${FILE_COMPRESSION:-xz}
LIMIT_MB=${LIMIT_MB:-1024}
command -v nix >/dev/null || { echo "nix not found" >&2; exit 1; }
[ -x "$KILN" ] || { echo "kiln binary '$KILN' not found (set KILN)" >&2; exit 1; }
KILN=$(readlink -f "$KILN")
TMP=$(mktemp -d)
SCHED=
cleanup() {
  [ -n "$SCHED" ] && kill "$SCHED" 2>/dev/null && wait "$SCHED" 2>/dev/null
  chmod -R u+w "$TMP" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
trap "exit 1" INT TERM
NIX_CONFIG=$(printf 'build-users-group =\nexperimental-features = nix-command\nsubstituters =\nrequire-sigs = true\n')
export NIX_CONFIG

# The closure.
. "$(dirname "$0")/closure_files.sh"
"$KILN" store generate-key bench-1 --secret-key-file "$TMP/sk" \
  --public-key-file "$TMP/pk" >/dev/null
PK=$(cat "$TMP/pk")

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$KILN" scheduler --state-dir "$TMP/state" --listen 'tcp://127.0.0.1:*' \
  --insecure-plaintext --web-listen "127.0.0.1:$PORT" \
  --cache-secret-key-file "$TMP/sk" --cache-compression "$COMPRESSION" \
  >"$TMP/sched.log" 2>&1 &
SCHED=$!
i=0
until grep -q listening "$TMP/sched.log"; do
  i=$((i + 1))
  [ "$i" -gt 300 ] && { cat "$TMP/sched.log"; exit 1; }
  sleep 0.1
done
URL="http://127.0.0.1:$PORT"

# `nix copy --from $1` of the closure into a fresh store and a fresh
# narinfo disk cache; prints the wall time in seconds.
copy() {
  chmod -R u+w "$TMP/dst" 2>/dev/null || true
  rm -rf "$TMP/dst" "$TMP/xdg"
  start=$(date +%s.%N)
  XDG_CACHE_HOME="$TMP/xdg" xargs nix copy --from "$1" --to "local?root=$TMP/dst" \
    --option trusted-public-keys "$PK" <"$TMP/paths"
  end=$(date +%s.%N)
  echo "$start $end" | awk '{ printf "%.2f\n", $2 - $1 }'
}

cold=$(copy "$URL")
echo "kiln cold (compresses each NAR once, $COMPRESSION): $cold s"
echo "kiln cache on disk: $(du -sm "$TMP/state/binary-cache" | cut -f1) MiB"
# The file:// cache, written by Nix from the store just filled.
chmod -R u+w "$TMP/dst" 2>/dev/null || true
mv "$TMP/dst" "$TMP/nixsrc"
start=$(date +%s.%N)
xargs nix copy --from "local?root=$TMP/nixsrc" \
  --to "file://$TMP/filecache?compression=$FILE_COMPRESSION" <"$TMP/paths"
end=$(date +%s.%N)
echo "nix copy --to file:// ($FILE_COMPRESSION): $(echo "$start $end" | awk '{ printf "%.2f", $2 - $1 }') s, $(du -sm "$TMP/filecache" | cut -f1) MiB"

: >"$TMP/kiln"
: >"$TMP/file"
r=0
while [ "$r" -lt "$REPS" ]; do
  copy "$URL" >>"$TMP/kiln"
  copy "file://$TMP/filecache" >>"$TMP/file"
  r=$((r + 1))
done
stats() { sort -n "$1" | awk '{ v[NR] = $1 } END { printf "%.2f %.2f", v[1], v[int((NR + 1) / 2)] }'; }
k=$(stats "$TMP/kiln")
f=$(stats "$TMP/file")
echo "kiln http ($COMPRESSION) wall min/median: $k s"
echo "file:// ($FILE_COMPRESSION) wall min/median: $f s"
echo "$f $k" | awk '{ printf "ratio file:// / kiln: min %.2fx  median %.2fx (goal >= 1)\n", $1 / $3, $2 / $4 }'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
