// The read-only view of the scheduler's state (state_view.h).
#include "kiln/scheduler/state_view.h"

#include "kiln/common/file.h"

namespace kiln::scheduler {

StateView::StateView(const std::string& stateDir)
    : db_(stateDir + "/scheduler.sqlite", StateDb::ReadOnly{}) {}

std::unique_ptr<StateView> StateView::openIfExists(
    const std::string& stateDir) {
  if (!pathExists(stateDir + "/scheduler.sqlite")) return nullptr;
  return std::make_unique<StateView>(stateDir);
}

std::vector<BuildRow> StateView::builds(int64_t eval) {
  return eval ? db_.buildsOfEval(eval) : db_.allBuilds();
}

std::vector<StepRow> StateView::steps() { return db_.allSteps(); }

std::vector<StateView::Output> StateView::outputs(int64_t eval) {
  std::vector<Output> out;
  for (auto& b : builds(eval))
    for (auto& [name, path] : db_.buildOutputs(b.id))
      out.push_back({b.id, b.job, name, path});
  return out;
}

std::optional<CachedFailureRow> StateView::cachedFailure(
    const std::string& drvPath) {
  for (auto& f : db_.cachedFailures())
    if (f.drvPath == drvPath) return f;
  return std::nullopt;
}

int64_t StateView::latestEvaluation() {
  int64_t latest = 0;
  for (auto& js : db_.jobsets())
    for (auto& e : db_.evaluations(js.id)) latest = std::max(latest, e.id);
  return latest;
}

}  // namespace kiln::scheduler
