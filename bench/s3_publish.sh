#!/bin/sh
# Benchmark: publishing a ~1 GiB closure into an S3 bucket the way the
# farm's cache publisher does today (issue 32, stage 1: the scheduler reads
# each NAR from its central store, compresses it and uploads it;
# store::BinaryCacheWriter through S3CacheStorage), measured as `kiln store
# copy-to-cache --to s3://…` against a real radosgw on loopback
# (scripts/start-object-store.sh): wall time, CPU (user + sys) and peak
# memory, per compression, each into a fresh bucket.
#   bench/s3_publish.sh [SRC]   (default /usr/lib/x86_64-linux-gnu)
# The closure: the entries of SRC of at least 1 MiB (no symlinks), added
# with `kiln store add` until LIMIT_MB. Environment: KILN (default
# build/release/cli/kiln), LIMIT_MB (default 1024), COMPRESSIONS (default
# "zstd"; "zstd xz" adds xz, which takes minutes per GiB). Not a test:
# prints figures; fails only if a copy fails. The farm's two paths side by
# side (through the scheduler against direct uploads from the worker) are
# bench/direct_upload_bench.cc.
set -eu
SRC=${1:-/usr/lib/x86_64-linux-gnu}
KILN=${KILN:-build/release/cli/kiln}
LIMIT_MB=${LIMIT_MB:-1024}
COMPRESSIONS=${COMPRESSIONS:-zstd}
HERE=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$KILN" ] || { echo "kiln binary '$KILN' not found (set KILN)" >&2; exit 1; }
KILN=$(readlink -f "$KILN")
TMP=$(mktemp -d)
cleanup() {
  "$HERE/scripts/start-object-store.sh" stop "$TMP/s3" >/dev/null 2>&1 || true
  chmod -R u+w "$TMP" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
trap "exit 1" INT TERM

. "$HERE/bench/closure_files.sh"
"$KILN" store generate-key bench-1 "$TMP/sk" "$TMP/pk" >/dev/null

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# Room for every compression's copy in the OSD's memory.
KILN_S3_MEMORY=$((LIMIT_MB * 3 * 1048576 + 1073741824))
export KILN_S3_MEMORY
eval "$("$HERE/scripts/start-object-store.sh" "$TMP/s3" "$PORT")"
for c in $COMPRESSIONS; do
  curl -sS --aws-sigv4 aws:amz:us-east-1:s3 \
    --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
    -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -X PUT \
    "$KILN_S3_ENDPOINT/bench-$c" >/dev/null
  /usr/bin/time -f "%e %U %S %M" -o "$TMP/time" xargs "$KILN" store \
    copy-to-cache --state-dir "$TMP/state" \
    --to "s3://bench-$c?endpoint=$KILN_S3_ENDPOINT" --compression "$c" \
    --secret-key-file "$TMP/sk" <"$TMP/paths" >/dev/null
  read -r wall user sys rss <"$TMP/time"
  echo "$c: wall ${wall} s, cpu $(echo "$user + $sys" | bc) s" \
    "(user $user, sys $sys), peak RSS $((rss / 1024)) MiB;" \
    "per GiB: $(echo "scale=2; $wall * 1024 / ($total / 1024)" | bc) s wall," \
    "$(echo "scale=2; ($user + $sys) * 1024 / ($total / 1024)" | bc) s cpu"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
