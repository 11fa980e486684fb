# Sourced by the cache benchmarks (bincache_copy.sh, s3_publish.sh): adds
# the entries of $SRC of at least 1 MiB (no symlinks) to the store under
# $TMP/state with `$KILN store add` until $LIMIT_MB, writes their store
# paths to $TMP/paths, sets `total` (KiB of files) and prints the closure's
# size and the machine's load.
total=0
: >"$TMP/list"
for f in "$SRC"/*; do
  [ -L "$f" ] && continue
  kb=$(du -sk "$f" | cut -f1)
  [ "$kb" -lt 1024 ] && continue
  echo "$f" >>"$TMP/list"
  total=$((total + kb))
  [ "$total" -ge $((LIMIT_MB * 1024)) ] && break
done
xargs "$KILN" store add --state-dir "$TMP/state" <"$TMP/list" >"$TMP/paths"
echo "closure: $(wc -l <"$TMP/paths") paths, $((total / 1024)) MiB of files"
echo "cpus: $(nproc), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
