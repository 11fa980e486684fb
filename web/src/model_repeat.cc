// The read model of reproducibility checks (model_repeat.h).
#include "model_repeat.h"

#include "kiln/common/status.h"
#include "kiln/scheduler/repeat_store.h"

namespace kiln::web {

namespace {

std::string checkStatusName(const scheduler::RepeatCheck& c) {
  return c.state == "differs"
             ? std::string(stepStatusName(StepStatus::kNotDeterministic))
             : c.state;
}

}  // namespace

json repeatCheckJson(scheduler::StateView& view, int64_t step) {
  auto c = scheduler::repeatCheck(view.rows(), step);
  if (!c) return nullptr;
  return {{"state", c->state},
          {"statusName", checkStatusName(*c)},
          {"firstWorker", c->firstWorker},
          {"secondWorker", c->secondWorker},
          {"differing", c->differing},
          {"report", c->report},
          {"finishedMs", c->finishedMs}};
}

std::string repeatWaitReason(const scheduler::SchedulerSnapshot* snap,
                             const std::string& firstWorker) {
  if (!snap) return "no scheduler is running";
  for (auto& w : snap->workers)
    if (w.name != firstWorker)
      return "it waits for a free slot on a worker other than " + firstWorker +
             ", after the builds' own steps";
  return "it waits for a worker other than " + firstWorker +
         ", which built it first and is the only worker connected";
}

json nonDeterministicJson(scheduler::StateView& view, int64_t jobset) {
  json out = json::array();
  for (auto& j : scheduler::nonDeterministicJobs(view.rows(), jobset))
    out.push_back({{"job", j.job},
                   {"build", j.build},
                   {"step", j.check.step},
                   {"drvPath", j.check.drvPath},
                   {"differing", j.check.differing},
                   {"statusName", checkStatusName(j.check)},
                   {"finishedMs", j.check.finishedMs}});
  return out;
}

}  // namespace kiln::web
