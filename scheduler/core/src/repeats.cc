// Reproducibility checks' second builds in the policy core (core.h,
// "reproducibility checks"; docs/release.md): repeats are steps of no
// build, kept in a list of their own rather than the ready queues, given
// only the slots the graph's work leaves free, never on their first
// build's worker.

#include <algorithm>

#include "core_impl.h"

namespace kiln::scheduler {

StepId SchedulerCore::addRepeat(const RepeatSpec& spec) {
  Impl& m = *impl_;
  m.advance();
  if (spec.drvPath.empty() || spec.system.empty())
    throw SchedulerError("scheduler: a repeat needs a path and a system");
  uint32_t cls = m.classFor(spec.system, spec.requiredFeatures);
  uint32_t idx = m.allocStep();
  Step& s = m.steps[idx];
  s.drvPath = spec.drvPath;
  s.cls = cls;
  s.repeat = true;
  s.avoidWorkers.push_back(spec.avoidWorker);
  s.avoidWorkers.insert(s.avoidWorkers.end(), spec.refusedBy.begin(),
                        spec.refusedBy.end());
  s.createdMs = m.clock.wallNow().time_since_epoch().count();
  m.repeats.push_back(idx);
  return m.idOf(idx);
}

bool SchedulerCore::isRepeat(StepId id) const {
  return impl_->steps[impl_->resolve(id)].repeat;
}

void SchedulerCore::finishRepeat(StepId id) {
  Impl& m = *impl_;
  m.advance();
  uint32_t idx = m.resolve(id);
  Step& s = m.steps[idx];
  if (!s.repeat || s.state != StepState::kRunning)
    throw SchedulerError("scheduler: finishRepeat on " + s.drvPath +
                         ", which is not a running repeat");
  if (s.worker != kNone) m.freeSlot(idx);
  m.freeStep(idx);
}

bool SchedulerCore::refuseRepeat(StepId id) {
  Impl& m = *impl_;
  m.advance();
  uint32_t idx = m.resolve(id);
  Step& s = m.steps[idx];
  if (!s.repeat || s.state != StepState::kRunning || s.worker == kNone)
    throw SchedulerError("scheduler: refuseRepeat on " + s.drvPath +
                         ", which is not a running repeat");
  s.avoidWorkers.push_back(m.workers[s.worker].spec.name);
  const auto& ws = m.classes[s.cls].workers;
  bool other = std::any_of(ws.begin(), ws.end(),
                           [&](uint32_t w) { return m.repeatMayUse(s, w); });
  if (!other) {
    m.freeSlot(idx);
    m.freeStep(idx);
    return false;
  }
  m.requeueRepeat(idx);
  return true;
}

void SchedulerCore::dropRepeat(StepId id) {
  Impl& m = *impl_;
  m.advance();
  uint32_t idx = m.resolve(id);
  Step& s = m.steps[idx];
  if (!s.repeat)
    throw SchedulerError("scheduler: dropRepeat on " + s.drvPath +
                         ", which is not a repeat");
  if (s.state == StepState::kRunning && s.worker != kNone) m.freeSlot(idx);
  std::erase(m.repeats, idx);
  m.freeStep(idx);
}

bool SchedulerCore::adoptRepeat(StepId id, WorkerId worker) {
  Impl& m = *impl_;
  m.advance();
  uint32_t idx = m.resolve(id);
  uint32_t w = m.resolveWorker(worker);
  const Step& s = m.steps[idx];
  if (!s.repeat)
    throw SchedulerError("scheduler: adoptRepeat on " + s.drvPath +
                         ", which is not a repeat");
  const Worker& wk = m.workers[w];
  auto waiting = std::find(m.repeats.begin(), m.repeats.end(), idx);
  if (waiting == m.repeats.end() || wk.free() == 0 ||
      std::find(wk.classes.begin(), wk.classes.end(), s.cls) ==
          wk.classes.end())
    return false;
  m.repeats.erase(waiting);
  m.start(idx, w);
  return true;
}

bool SchedulerCore::Impl::repeatMayUse(const Step& s, uint32_t w) const {
  return std::find(s.avoidWorkers.begin(), s.avoidWorkers.end(),
                   workers[w].spec.name) == s.avoidWorkers.end();
}

std::optional<uint32_t> SchedulerCore::Impl::repeatWorker(const Step& s) const {
  std::optional<uint32_t> best;
  double bestScore = 0;
  for (uint32_t w : classes[s.cls].workers) {
    const Worker& wk = workers[w];
    if (wk.available() == 0 || !repeatMayUse(s, w)) continue;
    double score = effectiveLoad(wk) / wk.spec.speedFactor;
    if (!best || score < bestScore) {
      best = w;
      bestScore = score;
    }
  }
  return best;
}

void SchedulerCore::Impl::dispatchRepeats(std::vector<Assignment>& out,
                                          size_t max) {
  // Only slots that no queued step of the graph could take: the graph's
  // work always goes first.
  for (size_t i = 0; i < repeats.size() && out.size() < max;) {
    uint32_t idx = repeats[i];
    Step& s = steps[idx];
    std::optional<uint32_t> w;
    if (!queues.best(s.cls)) w = repeatWorker(s);
    if (!w) {
      ++i;
      continue;
    }
    repeats.erase(repeats.begin() + static_cast<ptrdiff_t>(i));
    start(idx, *w);
    ++counters.dispatchDecisions;
    out.push_back(
        Assignment{idOf(idx), {*w, workers[*w].generation}, /*repeat=*/true});
  }
}

void SchedulerCore::Impl::requeueRepeat(uint32_t idx) {
  Step& s = steps[idx];
  if (s.worker != kNone) freeSlot(idx);
  setState(s, StepState::kWaiting);
  repeats.insert(repeats.begin(), idx);
}

WaitReason SchedulerCore::Impl::repeatPlacement(const Step& s) const {
  using K = WaitReason::Kind;
  const StepClass& c = classes[s.cls];
  std::string check = "reproducibility check: ";
  bool other = std::any_of(c.workers.begin(), c.workers.end(),
                           [&](uint32_t w) { return repeatMayUse(s, w); });
  std::string avoided = s.avoidWorkers.front();
  for (size_t i = 1; i < s.avoidWorkers.size(); ++i)
    avoided += ", " + s.avoidWorkers[i];
  std::string why = s.avoidWorkers.size() == 1
                        ? ", which built it first"
                        : " (the first built it, the others hold its outputs)";
  if (!other)
    return {K::kNoWorkerForSystem,
            check + "waits for a " + c.system + " worker other than " +
                avoided + why,
            0,
            {}};
  if (repeatWorker(s) && !queues.best(s.cls))
    return {K::kReady, check + "next dispatch", 0, {}};
  return {K::kAllSlotsBusy,
          check + "waits for a free slot on a worker other than " + avoided +
              " (after the builds' own steps)",
          0,
          {}};
}

}  // namespace kiln::scheduler
