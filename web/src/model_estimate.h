#pragma once
// The expected finish of unfinished evaluations on the evaluation page and
// the overview (model_estimate.cc; docs/scheduler.md, "Expected finish"):
// made from the state database at most once per evaluation and ttl, and
// shared by the requests meanwhile.

#include <chrono>
#include <memory>

#include "kiln/scheduler/snapshot.h"
#include "kiln/web/model.h"
#include "model_cache.h"

namespace kiln::web {

/// Expected finishes by evaluation. Thread-safe.
class EstimateModels {
 public:
  /// Borrows `clock`, which must outlive it.
  explicit EstimateModels(const Clock& clock, std::chrono::milliseconds ttl =
                                                  std::chrono::seconds(15));
  /// Evaluation `eval` (of `jobset`): {"expected": null when nothing is
  /// left, else {"finishMs", "madeMs", "criticalPathSec", "totalWorkSec",
  /// "steps", "truncated", "slots"}, "last": null when no finished
  /// evaluation of the jobset has a recorded estimate, else {"eval",
  /// "madeMs", "estimatedMs", "actualMs", "errorMs", "percent"}}. `snap`
  /// (may be null) gives the farm's slots.
  json evaluation(scheduler::StateView& view,
                  const scheduler::SchedulerSnapshot* snap, int64_t eval,
                  int64_t jobset);

 private:
  const Clock& clock_;
  ModelCache cache_;
};

/// {"eval", "madeMs", "estimatedMs", "actualMs", "errorMs", "percent"} of
/// the newest finished evaluation of `jobset` (0: any) with a recorded
/// estimate, or null.
json lastEstimateJson(scheduler::StateView& view, int64_t jobset);

}  // namespace kiln::web
