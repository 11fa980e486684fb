#pragma once
/// Expected finish of evaluations (docs/scheduler.md, "Expected finish";
/// schema migration 17): the remaining work of an unfinished evaluation
/// read from the state database, its estimate (expected_finish.h), the
/// estimate recorded when the evaluation's builds were made, and how far
/// off it was once the evaluation finished.

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "kiln/scheduler/expected_finish.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// The most remaining steps one estimate reads (more: `truncated`).
inline constexpr int64_t kMaxEstimatedSteps = 50000;
/// A package never built successfully is expected to take this long.
inline constexpr double kDefaultStepSec = 60;

/// An estimate of when an evaluation's builds will all have finished.
struct EvalEstimate {
  int64_t madeMs = 0;      ///< when it was made (Unix ms)
  int64_t finishMs = 0;    ///< the expected finish (Unix ms)
  FinishEstimate parts;    ///< critical path, total work
  size_t steps = 0;        ///< remaining steps it counted
  bool truncated = false;  ///< more than kMaxEstimatedSteps remained
};

/// Average successful durations per package (seconds) of the packages
/// that the unfinished steps of evaluation `eval` build.
std::unordered_map<std::string, double> evalStepHistory(StateDb& db,
                                                        int64_t eval);

/// Estimates evaluation `eval` at `nowMs` with `slots` build slots (0
/// counts as 1) from `history` (evalStepHistory): its unfinished builds'
/// unfinished steps and their dependencies among them; a step with a
/// start time and no end counts as running. nullopt when nothing remains.
std::optional<EvalEstimate> estimateEvaluation(
    StateDb& db, int64_t eval, unsigned slots, int64_t nowMs,
    const std::unordered_map<std::string, double>& history);

/// Records `e` as the estimate of evaluation `eval`; the first one
/// recorded stays (false, nothing changed, when there is one).
bool recordEvalEstimate(StateDb& db, int64_t eval, const EvalEstimate& e);

/// A recorded estimate of a finished evaluation and how far off it was.
struct PastEstimate {
  int64_t eval = 0;
  int64_t madeMs = 0;
  int64_t estimatedMs = 0;
  int64_t actualMs = 0;  ///< its last build's end
  EstimateError error;
};

/// The newest finished evaluation of `jobset` (0: of any jobset) that
/// has a recorded estimate, compared with when it actually finished.
std::optional<PastEstimate> lastEstimate(StateDb& db, int64_t jobset);

}  // namespace kiln::scheduler
