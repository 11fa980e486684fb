#!/bin/bash
# buildable-collection.sh N OUTDIR [gen-collection.py options]
# Writes OUTDIR/default.nix: ../shared/bench/gen-collection.py's collection
# of N derivations, changed so that it can actually be built:
#  - each builder gets PATH=/usr/bin:/bin (Nix and kiln start builders with
#    PATH=/path-not-set, so the generated `cat` is not found);
#  - `cat DEP >> $out` becomes `head -c 64 DEP >> $out; echo DEP >> $out`:
#    the original concatenates every dependency's output, so sizes grow
#    exponentially with depth (N=2000: largest output 9.1 GB, 350 GB in
#    all). The new builder still reads each input and refers to it (the
#    runtime closure is the same DAG), and outputs stay under ~1 KB.
# The DAG, names and evaluation cost are unchanged.
set -euo pipefail
N=$1
OUT=$2
shift 2
SHARED=${KILN_SHARED_DIR:-$(dirname "$0")/../../shared}
python3 "$SHARED/bench/gen-collection.py" "$N" "$OUT" "$@" >/dev/null
f="$OUT/default.nix"
grep -q '^    inherit system;$' "$f"
grep -q '(d: "cat ${d} >> $out")' "$f"
sed -i -e 's|^    inherit system;$|    inherit system;\n    PATH = "/usr/bin:/bin";|' \
  -e 's|(d: "cat ${d} >> $out")|(d: "head -c 64 ${d} >> $out; echo ${d} >> $out")|' "$f"
