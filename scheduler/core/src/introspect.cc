// Explanations (whyWaiting), snapshots and metrics, including the idle
// worker-slot accounting.

#include <algorithm>

#include "core_impl.h"

namespace kiln::scheduler {

namespace {
std::string joinMissing(const std::vector<std::string>& want,
                        const std::vector<std::string>& a,
                        const std::vector<std::string>& b) {
  std::string out;
  for (const auto& f : want) {
    if (std::find(a.begin(), a.end(), f) != a.end()) continue;
    if (std::find(b.begin(), b.end(), f) != b.end()) continue;
    out += (out.empty() ? "" : ", ") + f;
  }
  return out;
}
}  // namespace

// Accounts the interval since the last call: the state did not change in
// between, so each worker's free slots that could run a queued step were
// idle for the whole interval. O(workers * classes-per-worker).
void SchedulerCore::Impl::accrueIdle(TimePoint now) {
  if (now <= lastAccrual) return;
  double dt = std::chrono::duration<double>(now - lastAccrual).count();
  for (Worker& w : workers) {
    if (!w.alive) continue;
    size_t work = 0;
    if (w.available() > 0)
      for (uint32_t c : w.classes) work += queues.size(c);
    settleIdleSlots(w, std::min(w.available(), work));
    if (work == 0) {
      w.idleSince.reset();
      continue;
    }
    counters.idleSlotSeconds +=
        static_cast<double>(std::min(w.available(), work)) * dt;
    if (!w.idleSince) w.idleSince = lastAccrual;
    counters.longestIdleWithWork =
        std::max(counters.longestIdleWithWork, now - *w.idleSince);
  }
  lastAccrual = now;
}

// Per-slot stretches: `idleSlots` of the worker's free slots could run a
// queued step during the interval that ends now (the state was constant
// since lastAccrual). Stretches that ended at lastAccrual (a dispatch, the
// work went elsewhere, the worker left) are recorded; new ones start at
// lastAccrual, when the state last changed.
void SchedulerCore::Impl::settleIdleSlots(Worker& w, size_t idleSlots) {
  while (w.idleSlotsSince.size() > idleSlots) {
    Duration d = lastAccrual - w.idleSlotsSince.front();
    w.idleSlotsSince.pop_front();
    idleStretches.push_back(d);
    ++counters.slotIdleStretches;
    counters.longestSlotIdle = std::max(counters.longestSlotIdle, d);
  }
  while (w.idleSlotsSince.size() < idleSlots)
    w.idleSlotsSince.push_back(lastAccrual);
}

// Why a queued step is not running: nobody has its system, nobody fits its
// features, or every fitting worker is full.
WaitReason SchedulerCore::Impl::placement(const Step& s) const {
  const StepClass& c = classes[s.cls];
  if (c.workers.empty()) {
    std::string why;
    for (const Worker& w : workers) {
      if (!w.alive) continue;
      if (c.system != "builtin" &&
          std::find(w.spec.systems.begin(), w.spec.systems.end(), c.system) ==
              w.spec.systems.end())
        continue;
      std::string lacks = joinMissing(c.features, w.spec.supportedFeatures,
                                      w.spec.mandatoryFeatures);
      std::string extra = joinMissing(w.spec.mandatoryFeatures, c.features, {});
      why += (why.empty() ? "" : "; ") + w.spec.name;
      if (!lacks.empty()) why += " lacks " + lacks;
      if (!extra.empty())
        why += (lacks.empty() ? "" : ",") + std::string(" requires ") + extra;
    }
    if (why.empty())
      return {WaitReason::Kind::kNoWorkerForSystem,
              "no worker builds " + c.system,
              0,
              {}};
    return {WaitReason::Kind::kMissingFeature,
            "no " + c.system + " worker fits: " + why,
            0,
            {}};
  }
  if (c.freeSlots == 0 &&
      std::any_of(c.workers.begin(), c.workers.end(),
                  [&](uint32_t w) { return workers[w].free() > 0; }))
    return pressurePlacement(c);
  if (c.freeSlots == 0)
    return {WaitReason::Kind::kAllSlotsBusy,
            "all " + std::to_string(c.workers.size()) +
                " suitable worker(s) are busy",
            0,
            {}};
  if (uint64_t need = memoryNeed(s);
      memoryGated(s, need) &&
      std::none_of(c.workers.begin(), c.workers.end(), [&](uint32_t w) {
        return workers[w].available() > 0 && fitsMemory(workers[w], need);
      }))
    return memoryPlacement(s, need);
  return {WaitReason::Kind::kReady,
          "runnable; a suitable worker has a free slot",
          0,
          {}};
}

WaitReason SchedulerCore::whyWaiting(StepId id) const {
  const Impl& m = *impl_;
  const Step& s = m.steps[m.resolve(id)];
  using K = WaitReason::Kind;
  switch (s.state) {
    case StepState::kRunning:
      if (s.worker == kNone)
        return {K::kRunning, "built; its outputs are being registered", 0, {}};
      return {
          K::kRunning, "running on " + m.workers[s.worker].spec.name, 0, {}};
    case StepState::kFailed:
      return {K::kFailed,
              "failed with status " +
                  std::to_string(static_cast<int>(s.failStatus)),
              0,
              {}};
    case StepState::kBackoff:
      return {K::kBackoff,
              "transient failure; retry " + std::to_string(s.attempts) +
                  " after backoff",
              0, s.backoffUntil};
    case StepState::kQueued:
      return m.placement(s);
    case StepState::kWaiting:
      if (s.repeat) return m.repeatPlacement(s);
      break;
  }
  if (s.blockedDeps > 0) {
    // Walk down through blocked dependencies to one that failed itself.
    const Step* cur = &s;
    while (!cur->failed) {
      for (uint32_t d : cur->deps)
        if (m.poisoned(m.steps[d])) {
          cur = &m.steps[d];
          break;
        }
    }
    return {
        K::kDependencyFailed, "dependency " + cur->drvPath + " failed", 0, {}};
  }
  if (!s.deps.empty())
    return {K::kWaitingForDependencies,
            std::to_string(s.deps.size()) + " unfinished dependencies",
            s.deps.size(),
            {}};
  return {K::kNotNeeded, "no build needs this step", 0, {}};
}

StepView SchedulerCore::step(StepId id) const {
  const Impl& m = *impl_;
  uint32_t idx = m.resolve(id);
  const Step& s = m.steps[idx];
  StepView v;
  v.id = id;
  v.drvPath = s.drvPath;
  v.system = m.classes[s.cls].system;
  v.state = static_cast<StepView::State>(s.state);
  v.globalPriority = s.applied.attached() ? s.applied.global : 0;
  v.localPriority = s.applied.attached() ? s.applied.local : 0;
  v.jobset = s.applied.jobset;
  v.ownerBuild = s.applied.attached() ? s.applied.minBuild : 0;
  v.criticalPath = s.applied.attached() ? s.applied.cpAbove : s.expected;
  v.expectedDuration = s.expected;
  v.memoryNeed = m.memoryNeed(s);
  v.unfinishedDeps = s.deps.size();
  v.attempts = s.attempts;
  if (s.worker != kNone)
    v.worker = WorkerId{s.worker, m.workers[s.worker].generation};
  return v;
}

SchedulerMetrics SchedulerCore::metrics() const {
  const Impl& m = *impl_;
  SchedulerMetrics r = m.counters;
  for (uint32_t c = 0; c < m.classes.size(); ++c)
    r.queuedBySystem[m.classes[c].system] += m.queues.size(c);
  auto count = [&](StepState s) {
    return m.stateCount[static_cast<size_t>(s)];
  };
  r.runningSteps = count(StepState::kRunning);
  r.waitingRepeats = m.repeats.size();
  r.waitingSteps = count(StepState::kWaiting) - r.waitingRepeats;
  r.backoffSteps = count(StepState::kBackoff);
  r.failedSteps = count(StepState::kFailed);
  r.builds = m.builds.size();
  for (const Worker& w : m.workers) {
    if (!w.alive) continue;
    ++r.workers;
    for (uint32_t idx : w.running) r.runningRepeats += m.steps[idx].repeat;
    r.workerSystems.insert(w.spec.systems.begin(), w.spec.systems.end());
    r.totalSlots += w.spec.slots;
    r.freeSlots += w.free();
  }
  return r;
}

}  // namespace kiln::scheduler
