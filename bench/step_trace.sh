#!/usr/bin/env bash
# Where the time of a `kiln build` goes, step by step, from a trace file
# written with KILN_TRACE=FILE (common/include/kiln/common/trace.h):
#   KILN_TRACE=/tmp/t kiln build ...; bench/step_trace.sh /tmp/t
# Prints, for each phase between two traced events of a step, how many
# steps had it, the total and the mean in ms, and the build's own
# milestones (evaluation, farm start, builds finished) from its start.
set -euo pipefail
trace=${1:?usage: bench/step_trace.sh TRACE_FILE}
awk -F'\t' '
  function phase(name, from, to, id) {
    if (!((id, from) in at) || !((id, to) in at)) return
    d = at[id, to] - at[id, from]
    n[name]++; sum[name] += d
    if (!(name in order)) { order[name] = ++phases; names[phases] = name }
  }
  {
    t = $1; comp = $2; ev = $3; id = $4; detail = $5
    if (start == "") start = t
    if (comp == "build") { milestone[++m] = sprintf("%-16s %8.1f ms", ev, t - start); next }
    if (ev == "received") byDrv[detail] = id
    if (id == 0 && (detail in byDrv)) id = byDrv[detail]
    if (!((id, ev) in at) || ev == "registered") at[id, ev] = t
    if (ev == "dispatched") { steps[id] = 1; dispatches[++nd] = t }
    if (ev == "succeeded") successes[++ns] = t
  }
  END {
    for (id in steps) {
      phase("dispatch -> worker received", "dispatched", "received", id)
      phase("received -> slot started (inputs)", "received", "slot-started", id)
      phase("slot started -> sandbox preparing", "slot-started", "sandbox-preparing", id)
      phase("sandbox setup -> builder started", "sandbox-preparing", "builder-started", id)
      phase("builder running", "builder-started", "builder-exited", id)
      phase("builder exited -> sandbox finished", "builder-exited", "sandbox-finished", id)
      phase("sandbox finished -> outputs collected", "sandbox-finished", "outputs-collected", id)
      phase("outputs collected -> stored on worker", "outputs-collected", "outputs-stored", id)
      phase("stored -> slot thread done", "outputs-stored", "slot-done", id)
      phase("slot done -> seen by worker loop", "slot-done", "done-seen", id)
      phase("seen -> upload received by scheduler", "done-seen", "upload-received", id)
      phase("upload received -> registered", "upload-received", "registered", id)
      phase("seen -> upload acknowledged", "done-seen", "uploaded", id)
      phase("result sent -> received", "result-sent", "result", id)
      phase("result -> succeeded", "result", "succeeded", id)
      phase("dispatched -> succeeded (whole step)", "dispatched", "succeeded", id)
    }
    printf "%-42s %6s %10s %9s\n", "phase", "steps", "total ms", "mean ms"
    for (i = 1; i <= phases; i++) {
      p = names[i]
      printf "%-42s %6d %10.1f %9.1f\n", p, n[p], sum[p], sum[p] / n[p]
    }
    # A success frees a slot or a dependent: how long until the next dispatch.
    gaps = 0; total = 0
    for (i = 1; i <= ns; i++) {
      best = ""
      for (j = 1; j <= nd; j++)
        if (dispatches[j] >= successes[i] && (best == "" || dispatches[j] < best)) best = dispatches[j]
      if (best != "") { gaps++; total += best - successes[i] }
    }
    if (gaps) printf "%-42s %6d %10.1f %9.1f\n", "succeeded -> next dispatch", gaps, total, total / gaps
    for (i = 1; i <= m; i++) print milestone[i]
  }' "$trace"
