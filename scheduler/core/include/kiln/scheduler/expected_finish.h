#pragma once
/// Expected finish of an evaluation (docs/scheduler.md, "Expected
/// finish"): the pure estimate from its remaining steps, each package's
/// past step duration and the farm's slots, and how far off an estimate
/// turned out. No I/O; the service gathers the inputs and records the
/// estimate made when the evaluation started.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::scheduler {

/// One unfinished step of an evaluation.
struct RemainingStep {
  std::string pname;  ///< its package, the key of past durations
  /// Indices (into the same list) of the remaining steps it needs.
  std::vector<size_t> deps;
  bool running = false;
  double elapsedSec = 0;  ///< how long it has run (running only), ≥ 0
};

/// What the estimate is made of.
struct FinishEstimate {
  /// Seconds from now to the last step's end: the larger of the critical
  /// path and the remaining work spread over the slots.
  double seconds = 0;
  /// The longest chain of expected durations through the remaining steps
  /// (a running step counts what it has left).
  double criticalPathSec = 0;
  /// The sum of the remaining steps' expected durations.
  double totalWorkSec = 0;
};

/// Estimates when `steps` will all have finished with `slots` (≥ 1)
/// build slots: each step's expected duration is its package's past
/// duration in `history`, `defaultSec` for a package never built; a
/// running step counts what is left of it (at least 0). Throws
/// std::invalid_argument on a dependency index out of range, a cycle, no
/// slot, or a negative or non-finite duration. O(steps + edges).
FinishEstimate estimateFinish(
    const std::vector<RemainingStep>& steps,
    const std::unordered_map<std::string, double>& history, unsigned slots,
    double defaultSec);

/// How far off an estimate was once the evaluation finished.
struct EstimateError {
  int64_t errorMs = 0;  ///< actual − estimated finish (> 0: later)
  /// |error| relative to the time the estimate had to look ahead
  /// (estimated finish − when it was made), percent; 0 when it looked
  /// ahead no time at all and was exact, 100 when it looked ahead none
  /// and was not.
  double percent = 0;
};

/// Compares the finish estimated at `madeAtMs` for `estimatedMs` with
/// the actual finish `actualMs` (Unix ms).
EstimateError estimateError(int64_t madeAtMs, int64_t estimatedMs,
                            int64_t actualMs);

}  // namespace kiln::scheduler
