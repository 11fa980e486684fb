// The read-only view of the scheduler's state (state_view.h).
#include "kiln/scheduler/state_view.h"

#include "kiln/common/file.h"

namespace kiln::scheduler {

StateView::StateView(const std::string& stateDir)
    : StateView(DatabaseSpec::inStateDir(stateDir)) {}

StateView::StateView(const DatabaseSpec& database)
    : db_(database, StateDb::ReadOnly{}) {}

std::unique_ptr<StateView> StateView::openIfExists(
    const std::string& stateDir) {
  return openIfExists(DatabaseSpec::inStateDir(stateDir));
}

std::unique_ptr<StateView> StateView::openIfExists(
    const DatabaseSpec& database) {
  if (!database.isPostgres()) {
    if (!pathExists(database.sqlitePath)) return nullptr;
  } else if (StateDb::storedVersion(database) == 0) {
    return nullptr;  // no scheduler has created the schema yet
  }
  return std::make_unique<StateView>(database);
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
  // Expired or not: the time no failure expires before.
  return db_.cachedFailure(drvPath, 0);
}

int64_t StateView::latestEvaluation() {
  auto s = db_.db().prepare("SELECT coalesce(max(id), 0) FROM evaluations");
  return s.step() ? s.getInt(0) : 0;
}

}  // namespace kiln::scheduler
