// Ready-queue membership, time-driven housekeeping and the dispatch
// decision (best class head, then best worker for it).

#include <algorithm>
#include <cmath>

#include "core_impl.h"

namespace kiln::scheduler {

namespace {
// Bounds the steps one nextAssignments call sets aside for their memory.
constexpr size_t kMaxSetAside = 256;
}  // namespace

// Everything due at the clock's current time, run at the top of every
// mutating call: idle-time accounting for the interval that just ended,
// steps whose backoff expired, and the fairness window.
void SchedulerCore::Impl::advance() {
  TimePoint now = clock.wallNow();
  accrueIdle(now);
  while (!backoff.empty() && backoff.top().until <= now) {
    BackoffEntry e = backoff.top();
    backoff.pop();
    Step& s = steps[e.step];
    if (!s.alive || s.generation != e.generation ||
        s.state != StepState::kBackoff || s.backoffUntil != e.until)
      continue;
    setState(s, StepState::kWaiting);
    maybeEnqueue(e.step);
  }
  for (JobsetId j : usage.expire(now)) syncFairness(j);
}

void SchedulerCore::Impl::maybeEnqueue(uint32_t idx) {
  Step& s = steps[idx];
  if (s.state == StepState::kWaiting && s.deps.empty() &&
      s.applied.attached() && s.blockedDeps == 0)
    enqueue(idx);
}

void SchedulerCore::Impl::enqueue(uint32_t idx) {
  Step& s = steps[idx];
  s.key = StepKey{s.applied.global, s.applied.cpAbove, s.applied.local,
                  s.createdMs, idx};
  s.keyJobset = s.applied.jobset;
  queues.insert(s.cls, s.keyJobset, s.key);
  setState(s, StepState::kQueued);
}

void SchedulerCore::Impl::dequeue(uint32_t idx) {
  Step& s = steps[idx];
  queues.erase(s.cls, s.keyJobset, s.key);
  setState(s, StepState::kWaiting);
}

// After a change of a step's attributes: re-key it if queued, or queue it
// if it just became needed and runnable.
void SchedulerCore::Impl::requeue(uint32_t idx) {
  if (steps[idx].state == StepState::kQueued) dequeue(idx);
  maybeEnqueue(idx);
}

// The class whose best step goes next among classes with a free slot.
// O(classes).
std::optional<uint32_t> SchedulerCore::Impl::bestClass() const {
  std::optional<uint32_t> best;
  std::optional<HeadKey> bestHead;
  for (uint32_t c = 0; c < classes.size(); ++c) {
    if (classes[c].freeSlots == 0) continue;
    auto h = queues.best(c);
    if (!h) continue;
    if (!bestHead || headBefore(*h, *bestHead)) {
      best = c;
      bestHead = h;
    }
  }
  return best;
}

double SchedulerCore::Impl::effectiveLoad(const Worker& w) const {
  // The heartbeat's load, corrected by the steps started or finished
  // since that heartbeat (each worth one slot's share).
  double delta = (static_cast<double>(w.running.size()) -
                  static_cast<double>(w.runningAtHeartbeat)) /
                 w.spec.slots;
  return std::max(0.0, w.reportedLoad + delta);
}

// Among the class's workers with a free slot: lowest load / speed, then
// most input bytes already present, then lowest index. O(workers).
// A step with a memory need (docs/scheduler.md, "Memory") goes only to a
// worker with that much free memory, while some suitable worker reports as
// much.
std::optional<uint32_t> SchedulerCore::Impl::chooseWorker(uint32_t cls,
                                                          uint32_t step) const {
  uint64_t need = memoryNeed(steps[step]);
  bool gated = memoryGated(steps[step], need);
  std::vector<uint32_t> tied;
  double bestScore = 0;
  for (uint32_t w : classes[cls].workers) {
    const Worker& wk = workers[w];
    if (wk.available() == 0) continue;
    if (gated && !fitsMemory(wk, need)) continue;
    double score = effectiveLoad(wk) / wk.spec.speedFactor;
    double eps = 1e-9 * std::max(1.0, std::fabs(bestScore));
    if (tied.empty() || score < bestScore - eps) {
      tied.assign(1, w);
      bestScore = score;
    } else if (score <= bestScore + eps) {
      tied.push_back(w);
    }
  }
  if (tied.empty()) return std::nullopt;
  if (tied.size() == 1 || !locality) {
    return *std::min_element(tied.begin(), tied.end());
  }
  std::sort(tied.begin(), tied.end());
  uint32_t best = tied.front();
  uint64_t bestBytes = 0;
  for (uint32_t w : tied) {
    uint64_t b = locality->bytesPresent(idOf(step), steps[step].drvPath,
                                        {w, workers[w].generation});
    if (b > bestBytes) {
      bestBytes = b;
      best = w;
    }
  }
  return best;
}

void SchedulerCore::Impl::start(uint32_t idx, uint32_t w) {
  Step& s = steps[idx];
  Worker& wk = workers[w];
  setState(s, StepState::kRunning);
  s.worker = w;
  s.startedAt = clock.wallNow();
  s.sentWithFree = freeMemory(wk);
  wk.memorySent += memoryNeed(s);
  wk.running.push_back(idx);
  if (wk.pressure.empty())
    for (uint32_t c : wk.classes) --classes[c].freeSlots;
  if (s.repeat) return;  // charged to no jobset
  s.chargedJobset = s.applied.jobset;
  s.chargedSeconds = s.expected;
  usage.addRunning(s.chargedJobset, s.chargedSeconds);
  syncFairness(s.chargedJobset);
}

void SchedulerCore::Impl::freeSlot(uint32_t idx) {
  Step& s = steps[idx];
  Worker& wk = workers[s.worker];
  auto it = std::find(wk.running.begin(), wk.running.end(), idx);
  *it = wk.running.back();
  wk.running.pop_back();
  if (wk.pressure.empty())
    for (uint32_t c : wk.classes) ++classes[c].freeSlots;
  s.worker = kNone;
}

void SchedulerCore::Impl::releaseRunning(uint32_t idx) {
  Step& s = steps[idx];
  if (s.worker != kNone) freeSlot(idx);
  if (s.repeat) return setState(s, StepState::kWaiting);
  usage.addRunning(s.chargedJobset, -s.chargedSeconds);
  syncFairness(s.chargedJobset);
  setState(s, StepState::kWaiting);
}

void SchedulerCore::releaseSlot(StepId id) {
  Impl& m = *impl_;
  m.advance();
  uint32_t idx = m.resolve(id);
  const Step& s = m.steps[idx];
  if (s.state != StepState::kRunning || s.worker == kNone)
    throw SchedulerError("scheduler: releaseSlot on " + s.drvPath +
                         ", which does not hold a worker slot");
  m.freeSlot(idx);
}

bool SchedulerCore::holdStep(StepId id, TimePoint until) {
  Impl& m = *impl_;
  m.advance();
  uint32_t idx = m.resolve(id);
  Step& s = m.steps[idx];
  if (s.state == StepState::kQueued) m.dequeue(idx);
  if (s.state == StepState::kBackoff) until = std::max(until, s.backoffUntil);
  if (s.state != StepState::kWaiting && s.state != StepState::kBackoff)
    return false;
  s.backoffUntil = until;
  m.setState(s, StepState::kBackoff);
  m.backoff.push(BackoffEntry{until, idx, s.generation});
  return true;
}

bool SchedulerCore::adoptStep(StepId id, WorkerId worker) {
  Impl& m = *impl_;
  m.advance();
  uint32_t idx = m.resolve(id);
  uint32_t w = m.resolveWorker(worker);
  Step& s = m.steps[idx];
  const Worker& wk = m.workers[w];
  bool runnable = s.state == StepState::kQueued ||
                  (s.state == StepState::kBackoff && s.deps.empty() &&
                   s.blockedDeps == 0 && s.applied.attached());
  if (!runnable || wk.free() == 0 ||
      std::find(wk.classes.begin(), wk.classes.end(), s.cls) ==
          wk.classes.end())
    return false;
  if (s.state == StepState::kQueued) m.dequeue(idx);
  m.start(idx, w);  // a backoff entry left behind is stale from now on
  return true;
}

std::vector<Assignment> SchedulerCore::nextAssignments(size_t max) {
  Impl& m = *impl_;
  m.advance();
  std::vector<Assignment> out;
  // Steps whose memory need no free worker meets now step aside for this
  // call (at most kMaxSetAside of them), so the ones behind them still go.
  std::vector<uint32_t> aside;
  while (out.size() < max && aside.size() < kMaxSetAside) {
    auto cls = m.bestClass();
    if (!cls) break;
    uint32_t idx = m.queues.best(*cls)->head.step;
    std::optional<uint32_t> w = m.chooseWorker(*cls, idx);
    m.dequeue(idx);
    if (!w) {
      aside.push_back(idx);
      continue;
    }
    m.start(idx, *w);
    ++m.counters.dispatchDecisions;
    out.push_back(Assignment{m.idOf(idx), {*w, m.workers[*w].generation}});
  }
  for (uint32_t idx : aside) m.enqueue(idx);
  m.dispatchRepeats(out, max);
  return out;
}

}  // namespace kiln::scheduler
