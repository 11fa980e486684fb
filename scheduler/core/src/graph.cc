// The step graph: storage, classes, attribute propagation (priorities,
// owner jobset, critical path) and removal of steps no build needs.

#include <algorithm>

#include "core_impl.h"

namespace kiln::scheduler {

Attrs combine(const Attrs& a, const Attrs& b) {
  Attrs r;
  r.global = std::max(a.global, b.global);
  r.local = std::max(a.local, b.local);
  const Attrs& owner = a.minBuild <= b.minBuild ? a : b;
  r.minBuild = owner.minBuild;
  r.jobset = owner.jobset;
  r.cpAbove = std::max(a.cpAbove, b.cpAbove);
  return r;
}

bool improves(const Attrs& from, const Attrs& to) {
  if (!from.attached()) return true;
  return to.global >= from.global && to.local >= from.local &&
         to.minBuild <= from.minBuild && to.cpAbove >= from.cpAbove;
}

std::unordered_map<BuildId, Build>::iterator SchedulerCore::Impl::findBuild(
    BuildId id, const char* action) {
  auto it = builds.find(id);
  if (it == builds.end())
    throw SchedulerError(std::string("scheduler: ") + action +
                         " of unknown build " + std::to_string(id));
  return it;
}

uint32_t SchedulerCore::Impl::classFor(const std::string& system,
                                       std::vector<std::string> features) {
  std::sort(features.begin(), features.end());
  features.erase(std::unique(features.begin(), features.end()), features.end());
  auto key = std::make_pair(system, features);
  if (auto it = classIndex.find(key); it != classIndex.end()) return it->second;
  uint32_t cls = queues.addClass();
  classes.push_back(StepClass{system, std::move(features), {}, 0});
  classIndex.emplace(std::move(key), cls);
  for (uint32_t w = 0; w < workers.size(); ++w)
    if (workers[w].alive && eligible(workers[w].spec, classes[cls]))
      linkWorker(w, cls);
  return cls;
}

uint32_t SchedulerCore::Impl::allocStep() {
  uint32_t idx;
  if (!freeSteps.empty()) {
    idx = freeSteps.back();
    freeSteps.pop_back();
  } else {
    idx = static_cast<uint32_t>(steps.size());
    steps.emplace_back();
  }
  Step& s = steps[idx];
  uint32_t gen = s.generation;
  s = Step{};
  s.generation = gen;
  s.alive = true;
  ++stateCount[static_cast<size_t>(StepState::kWaiting)];
  return idx;
}

void SchedulerCore::Impl::freeStep(uint32_t idx) {
  Step& s = steps[idx];
  --stateCount[static_cast<size_t>(s.state)];
  // A repeat may share its path with a live step of the graph.
  if (auto it = byDrv.find(s.drvPath); it != byDrv.end() && it->second == idx)
    byDrv.erase(it);
  uint32_t gen = s.generation + 1;
  s = Step{};
  s.generation = gen;
  freeSteps.push_back(idx);
}

void SchedulerCore::Impl::setState(Step& s, StepState st) {
  --stateCount[static_cast<size_t>(s.state)];
  ++stateCount[static_cast<size_t>(st)];
  s.state = st;
}

Attrs SchedulerCore::Impl::buildAttrs(const Build& b) const {
  return Attrs{b.global, b.local, b.id, b.jobset, 0};
}

Attrs SchedulerCore::Impl::outAttrs(const Step& s) const {
  if (!s.parents.attached()) return Attrs{};
  Attrs o = s.parents;
  o.cpAbove = s.expected + s.parents.cpAbove;
  return o;
}

void SchedulerCore::Impl::schedule(uint32_t idx, bool recompute) {
  Step& s = steps[idx];
  s.recompute = s.recompute || recompute;
  if (s.inHeap) return;
  s.inHeap = true;
  propagation.push(HeapEntry{s.level, idx, s.generation});
}

// Processes scheduled steps parents-first (by level), so each step is
// settled once per propagation. A pure improvement is pushed down with an
// O(1) combine; anything else makes the children recompute from all their
// parents. Descends only where a step's own attributes changed.
void SchedulerCore::Impl::propagate() {
  while (!propagation.empty()) {
    HeapEntry e = propagation.top();
    propagation.pop();
    Step& s = steps[e.step];
    if (!s.alive || s.generation != e.generation) continue;
    s.inHeap = false;
    if (s.recompute) {
      Attrs p;
      for (BuildId b : s.topOf) p = combine(p, buildAttrs(builds.at(b)));
      for (uint32_t r : s.rdeps) p = combine(p, steps[r].applied);
      s.parents = p;
      s.recompute = false;
    }
    Attrs old = s.applied;
    Attrs out = outAttrs(s);
    if (out == old) continue;
    s.applied = out;
    requeue(e.step);
    bool up = improves(old, out);
    for (uint32_t d : s.deps) {
      Step& c = steps[d];
      if (up) {
        Attrs p = combine(c.parents, out);
        if (p == c.parents) continue;
        c.parents = p;
      }
      schedule(d, !up);
    }
  }
}

void SchedulerCore::Impl::syncFairness(JobsetId jobset) {
  queues.setFairness(jobset, usage.fairness(jobset));
}

// Takes a step out of the queue, the backoff heap or its worker before it
// is dropped, and reports it (takeDropped).
void SchedulerCore::Impl::detach(uint32_t idx) {
  Step& s = steps[idx];
  dropped.push_back(idOf(idx));
  if (s.state == StepState::kQueued) {
    dequeue(idx);
  } else if (s.state == StepState::kRunning) {
    uint32_t w = s.worker;
    releaseRunning(idx);
    if (w != kNone)  // else the worker is done; only registration is left
      aborts.push_back(
          StepAbort{idOf(idx), {w, workers[w].generation}, s.drvPath});
  }
}

// Called when `idx` lost a parent (a build or a dependent step): drops it
// if nothing needs it any more (and, in turn, its dependencies), otherwise
// schedules it to recompute its inherited attributes.
void SchedulerCore::Impl::releaseParent(uint32_t start) {
  std::vector<uint32_t> stack{start};
  while (!stack.empty()) {
    uint32_t n = stack.back();
    stack.pop_back();
    Step& s = steps[n];
    if (!s.alive) continue;
    if (!s.topOf.empty() || !s.rdeps.empty()) {
      schedule(n, true);
      continue;
    }
    for (uint32_t d : s.deps) {
      auto& rd = steps[d].rdeps;
      rd.erase(std::find(rd.begin(), rd.end(), n));
      stack.push_back(d);
    }
    detach(n);
    freeStep(n);
  }
}

}  // namespace kiln::scheduler
