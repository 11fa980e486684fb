#pragma once
// What a `kiln evaluator` host sends the scheduler through the state
// database (eval_queue.h; docs/formats.md, "Evaluation results"): one
// zstd-compressed stream of records, each a tag byte and a little-endian
// 64-bit length, then that many bytes:
//   'H' the header (JSON: format 1, jobset, inputsHash, timeMs,
//       durationMs, skipped, error, and `sources` when the evaluated
//       sources travel along) — first, exactly once;
//   'P' a store path's metadata (JSON: path, narHash, narSize, references,
//       ca), directly followed by its NAR (narSize bytes, no tag): the
//       evaluated sources first (the header's `sources`), then the
//       closure of the jobs' `.drv`s, references first;
//   'J' a job, as a `kiln eval --json` line;
//   'E' the end.
// The reader trusts nothing it can check: every path must be content
// addressed (its `ca` gives the path and is checked against the NAR, a
// `.drv` as the store checks one), references must come first, each JSON
// record is at most 1 MiB, and a job's outputs are taken from its `.drv`.
// The sources are kept only as a `source` path without references, of at
// most maxSourceBytes; otherwise the evaluation stands without them.

#include <cstdint>

#include "evaluations.h"
#include "kiln/common/stream.h"
#include "kiln/store/local_store.h"

namespace kiln::scheduler {

/// Bounds of what readEvalStream accepts.
struct EvalStreamLimits {
  uint64_t maxPaths = 10'000'000;
  uint64_t maxJobs = 10'000'000;
  uint64_t maxNarBytes = uint64_t{4} << 30;  ///< per path
  /// The evaluated sources' NAR; larger ones are skipped, not stored.
  uint64_t maxSourceBytes = uint64_t{1} << 30;
};

/// Writes outcome `o` and the closure (in `store`, the evaluator's own) of
/// its jobs' `.drv`s to `out` as the compressed stream. Throws Error when
/// a path cannot be read.
void writeEvalStream(const EvalOutcome& o, store::LocalStore& store,
                     Sink& out);

/// Reads a stream written by writeEvalStream from `in`, adding its paths
/// to `store` (checked as above; already valid ones are skipped) and
/// returning the outcome's header fields, jobs and sources (set only when
/// they arrived as bounded above and are valid in `store`), and in `drvs` the
/// `.drv`s it added, parsed and checked (the caller takes the jobs'
/// closures from there: prefetchDrvs). A job whose `.drv` did not arrive
/// valid gets an error. Throws FormatError (or the store's errors) for a
/// malformed or dishonest stream; nothing unchecked is ever registered.
EvalOutcome readEvalStream(Source& in, store::LocalStore& store,
                           const EvalStreamLimits& limits = {});

}  // namespace kiln::scheduler
