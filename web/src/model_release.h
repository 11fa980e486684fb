#pragma once
// The read model of release engineering (model_release.cc, docs/release.md).

#include "kiln/web/model.h"

namespace kiln::web {

/// The constituents of aggregate build `build` with their statuses:
/// {"constituents": [build rows], "failed": [jobs that finished but did not
/// succeed], "unfinished": count, "truncated"}; null when it is no
/// aggregate.
json aggregateJson(scheduler::StateView& view, int64_t build);

/// The most builds a job's history charts.
inline constexpr int64_t kHistoryPoints = 100;

/// Job `job` of jobset `jobset` over its newest kHistoryPoints builds,
/// oldest first: {"points": [{"eval", "build", "statusName", "durationMs",
/// "outputSize", "closureSize"}]}, the sizes those of the build's `out`
/// output (its first when it has none) in the central store (`sizes`),
/// null when not known (not built, no store).
json jobHistoryJson(scheduler::StateView& view, int64_t jobset,
                    const std::string& job, const PathSizeFn& sizes);

/// The regressions that held the channel at evaluation `eval`
/// (docs/release.md, "Regression gates"): [{"job", "kind" ("closure": bytes,
/// "time": ms), "baseEval", "before", "after", "growthPercent"}], empty when
/// none.
json regressionsJson(scheduler::StateView& view, int64_t eval);

/// A jobset's channel: {"project", "jobset", "channelJob", "latest": the
/// advance it is at (null: none yet), "advances": the newest `limit`
/// advances, newest first}; each advance {"id", "eval", "build", "timeMs",
/// "inputsHash"}. NotFound for an unknown jobset.
json channelModel(scheduler::StateView& view, const std::string& project,
                  const std::string& jobset, int64_t limit);

}  // namespace kiln::web
