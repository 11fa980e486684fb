#pragma once
// The read model of reproducibility checks (model_repeat.cc,
// docs/release.md "Reproducibility checks").

#include "kiln/scheduler/snapshot.h"
#include "kiln/web/model.h"

namespace kiln::web {

/// The check of step `step`: {"state", "statusName" ("not-deterministic"
/// when the two builds differ, else the state), "firstWorker",
/// "secondWorker", "differing": [output names], "report": diffoscope's
/// text ("" until made), "finishedMs"}; null when it has none.
json repeatCheckJson(scheduler::StateView& view, int64_t step);

/// Why the pending check whose first build ran on `firstWorker` has no
/// second build yet, from the scheduler's snapshot (null: none running).
std::string repeatWaitReason(const scheduler::SchedulerSnapshot* snap,
                             const std::string& firstWorker);

/// The jobset's steps found not deterministic, newest first: [{"job" (""
/// for a dependency), "build" (0 then), "step", "drvPath", "differing",
/// "statusName", "finishedMs"}].
json nonDeterministicJson(scheduler::StateView& view, int64_t jobset);

}  // namespace kiln::web
