// Expected finish of evaluations in the web's models (model_estimate.h).
#include "model_estimate.h"

#include "kiln/scheduler/eval_estimate.h"

namespace kiln::web {

namespace {

unsigned farmSlots(const scheduler::SchedulerSnapshot* snap) {
  unsigned slots = 0;
  if (snap)
    for (auto& w : snap->workers) slots += w.slots;
  return std::max(1u, slots);
}

}  // namespace

EstimateModels::EstimateModels(const Clock& clock,
                               std::chrono::milliseconds ttl)
    : clock_(clock), cache_(clock, ttl) {}

json EstimateModels::evaluation(scheduler::StateView& view,
                                const scheduler::SchedulerSnapshot* snap,
                                int64_t eval, int64_t jobset) {
  return cache_.get("eval/" + std::to_string(eval), [&] {
    unsigned slots = farmSlots(snap);
    auto e = scheduler::estimateEvaluation(
        view.rows(), eval, slots, clock_.nowMs(),
        scheduler::evalStepHistory(view.rows(), eval));
    json expected = nullptr;
    if (e)
      expected = {{"finishMs", e->finishMs},
                  {"madeMs", e->madeMs},
                  {"criticalPathSec", e->parts.criticalPathSec},
                  {"totalWorkSec", e->parts.totalWorkSec},
                  {"steps", e->steps},
                  {"truncated", e->truncated},
                  {"slots", slots}};
    return json{{"expected", std::move(expected)},
                {"last", lastEstimateJson(view, jobset)}};
  });
}

json lastEstimateJson(scheduler::StateView& view, int64_t jobset) {
  auto p = scheduler::lastEstimate(view.rows(), jobset);
  if (!p) return nullptr;
  return {{"eval", p->eval},
          {"madeMs", p->madeMs},
          {"estimatedMs", p->estimatedMs},
          {"actualMs", p->actualMs},
          {"errorMs", p->error.errorMs},
          {"percent", p->error.percent}};
}

}  // namespace kiln::web
