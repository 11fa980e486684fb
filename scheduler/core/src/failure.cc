// End of an attempt: success (dependents may become runnable, builds
// finish, failed builds revive), permanent failure (dependent builds fail
// with status 2) and transient failure (retry with exponential backoff).

#include <algorithm>

#include "core_impl.h"

namespace kiln::scheduler {

namespace {
double seconds(Duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

void SchedulerCore::Impl::failBuild(BuildId id, StepStatus status,
                                    const std::string& cause) {
  Build& b = builds.at(id);
  if (b.failed) return;
  b.failed = true;
  events.push_back(BuildEvent{id, BuildEvent::Kind::kFailed, status, cause});
}

// `idx` just became poisoned (failed, or blocked by a failed dependency):
// every step above it that was clean becomes blocked and fails its builds
// with status 2. Each step is visited once per transition: O(edges).
void SchedulerCore::Impl::poisonRdeps(uint32_t idx, const std::string& cause) {
  std::vector<uint32_t> stack(steps[idx].rdeps);
  while (!stack.empty()) {
    Step& r = steps[stack.back()];
    stack.pop_back();
    if (++r.blockedDeps != 1 || r.failed) continue;
    for (BuildId b : r.topOf) failBuild(b, StepStatus::kDepFailed, cause);
    stack.insert(stack.end(), r.rdeps.begin(), r.rdeps.end());
  }
}

// The inverse: `idx` is clean again (its retry succeeded). Steps above it
// whose last poisoned dependency this was are unblocked, their failed
// builds revived.
void SchedulerCore::Impl::unpoisonRdeps(uint32_t idx,
                                        const std::string& cause) {
  std::vector<uint32_t> stack(steps[idx].rdeps);
  while (!stack.empty()) {
    uint32_t n = stack.back();
    stack.pop_back();
    Step& r = steps[n];
    if (--r.blockedDeps != 0 || r.failed) continue;
    for (BuildId id : r.topOf) {
      Build& b = builds.at(id);
      if (!b.failed) continue;
      b.failed = false;
      events.push_back(BuildEvent{id, BuildEvent::Kind::kRevived,
                                  StepStatus::kSuccess, cause});
    }
    stack.insert(stack.end(), r.rdeps.begin(), r.rdeps.end());
    maybeEnqueue(n);
  }
}

void SchedulerCore::Impl::succeed(uint32_t idx, Duration took) {
  Step& s = steps[idx];
  ++counters.stepsSucceeded;
  if (!s.pname.empty() && took.count() > 0) history[s.pname] = seconds(took);
  for (BuildId b : s.topOf) {
    events.push_back(BuildEvent{b, BuildEvent::Kind::kSucceeded,
                                StepStatus::kSuccess, s.drvPath});
    builds.erase(b);
  }
  if (s.failed) {
    s.failed = false;
    unpoisonRdeps(idx, s.drvPath);
  }
  for (uint32_t r : s.rdeps) {
    auto& deps = steps[r].deps;
    auto it = std::find(deps.begin(), deps.end(), idx);
    *it = deps.back();
    deps.pop_back();
    maybeEnqueue(r);
  }
  freeStep(idx);
}

void SchedulerCore::Impl::failPermanently(uint32_t idx, StepStatus status) {
  Step& s = steps[idx];
  ++counters.stepsFailed;
  if (s.state == StepState::kQueued) dequeue(idx);
  setState(s, StepState::kFailed);
  bool already = poisoned(s);
  s.failStatus = status;
  s.failed = true;
  for (BuildId b : s.topOf) failBuild(b, status, s.drvPath);
  if (!already) poisonRdeps(idx, s.drvPath);
}

void SchedulerCore::Impl::retryOrFail(uint32_t idx, const StepResult& result) {
  Step& s = steps[idx];
  ++s.attempts;
  if (s.attempts > config.maxRetries) {
    failPermanently(idx, result.status == StepStatus::kSuccess
                             ? StepStatus::kAborted
                             : result.status);
    return;
  }
  ++counters.retries;
  Duration wait = config.retryBackoffBase;
  for (unsigned i = 1; i < s.attempts && wait < config.retryBackoffMax; ++i)
    wait *= 2;
  wait = std::min(wait, config.retryBackoffMax);
  s.backoffUntil = clock.wallNow() + wait;
  setState(s, StepState::kBackoff);
  backoff.push(BackoffEntry{s.backoffUntil, idx, s.generation});
}

// Common end of a running attempt: free the slot, account the time to the
// step's jobset, then apply the outcome.
void SchedulerCore::Impl::endAttempt(uint32_t idx, const StepResult& result) {
  Step& s = steps[idx];
  releaseRunning(idx);
  notePeak(s, result);
  Duration took = std::max(result.duration, Duration{0});
  usage.addFinished(s.chargedJobset, clock.wallNow(), seconds(took));
  syncFairness(s.chargedJobset);
  switch (result.kind) {
    case StepResult::Kind::kSuccess:
      succeed(idx, took);
      break;
    case StepResult::Kind::kPermanent:
      failPermanently(idx, result.status);
      break;
    case StepResult::Kind::kTransient:
      retryOrFail(idx, result);
      break;
    case StepResult::Kind::kNotStarted:
      s.backoffUntil = clock.wallNow() + config.retryBackoffBase;
      setState(s, StepState::kBackoff);
      backoff.push(BackoffEntry{s.backoffUntil, idx, s.generation});
      break;
  }
}

void SchedulerCore::finishStep(StepId id, const StepResult& result) {
  Impl& m = *impl_;
  m.advance();
  uint32_t idx = m.resolve(id);
  if (m.steps[idx].state != StepState::kRunning || m.steps[idx].repeat)
    throw SchedulerError("scheduler: finishStep on " + m.steps[idx].drvPath +
                         ", which is not running (or is a repeat: "
                         "finishRepeat)");
  m.endAttempt(idx, result);
}

void SchedulerCore::failStep(StepId id, StepStatus status) {
  Impl& m = *impl_;
  m.advance();
  uint32_t idx = m.resolve(id);
  if (m.steps[idx].state == StepState::kRunning)
    throw SchedulerError("scheduler: failStep on running step " +
                         m.steps[idx].drvPath + " (use finishStep)");
  m.failPermanently(idx, status);
}

void SchedulerCore::restartStep(StepId id) {
  Impl& m = *impl_;
  m.advance();
  uint32_t idx = m.resolve(id);
  Step& s = m.steps[idx];
  if (s.state != StepState::kFailed)
    throw SchedulerError("scheduler: restartStep on " + s.drvPath +
                         ", which has not failed");
  s.attempts = 0;
  m.setState(s, StepState::kWaiting);
  m.maybeEnqueue(idx);
}

}  // namespace kiln::scheduler
