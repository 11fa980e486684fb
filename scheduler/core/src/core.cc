// SchedulerCore's graph-facing API: steps, builds, cancel, bump, history,
// jobset shares and the event outboxes.

#include <algorithm>
#include <utility>

#include "core_impl.h"

namespace kiln::scheduler {

SchedulerCore::SchedulerCore(const Clock& clock, SchedulerConfig config,
                             const InputLocality* locality)
    : impl_(std::make_unique<Impl>(clock, config, locality)) {}

SchedulerCore::~SchedulerCore() = default;

StepId SchedulerCore::addStep(const StepSpec& spec,
                              std::span<const StepId> deps) {
  Impl& m = *impl_;
  if (spec.drvPath.empty() || spec.system.empty())
    throw SchedulerError("scheduler: step '" + spec.drvPath +
                         "' has an empty path or system");
  if (auto it = m.byDrv.find(spec.drvPath); it != m.byDrv.end())
    return m.idOf(it->second);
  std::vector<uint32_t> depIdx;
  depIdx.reserve(deps.size());
  for (StepId d : deps) depIdx.push_back(m.resolve(d));
  std::sort(depIdx.begin(), depIdx.end());
  depIdx.erase(std::unique(depIdx.begin(), depIdx.end()), depIdx.end());
  m.advance();

  uint32_t cls = m.classFor(spec.system, spec.requiredFeatures);
  uint32_t idx = m.allocStep();
  Step& s = m.steps[idx];
  s.drvPath = spec.drvPath;
  s.pname = spec.pname;
  s.cls = cls;
  auto h = m.history.find(spec.pname);
  s.expected =
      h != m.history.end() ? h->second : m.config.defaultDurationSeconds;
  s.createdMs = spec.created.value_or(m.clock.wallNow()).time_since_epoch().count();
  for (uint32_t d : depIdx) {
    Step& dep = m.steps[d];
    s.level = std::max(s.level, dep.level + 1);
    dep.rdeps.push_back(idx);
    if (m.poisoned(dep)) ++s.blockedDeps;
  }
  s.deps = std::move(depIdx);
  m.byDrv.emplace(s.drvPath, idx);
  return m.idOf(idx);
}

std::optional<StepId> SchedulerCore::findStep(std::string_view drvPath) const {
  auto it = impl_->byDrv.find(std::string(drvPath));
  if (it == impl_->byDrv.end()) return std::nullopt;
  return impl_->idOf(it->second);
}

void SchedulerCore::addBuild(const BuildSpec& spec) {
  Impl& m = *impl_;
  if (m.builds.contains(spec.id))
    throw SchedulerError("scheduler: build " + std::to_string(spec.id) +
                         " added twice");
  uint32_t top = m.resolve(spec.top);
  m.advance();
  Build& b = m.builds[spec.id];
  b = Build{spec.id, spec.jobset, top, spec.globalPriority, spec.localPriority,
            false};
  Step& s = m.steps[top];
  s.topOf.push_back(spec.id);
  if (m.poisoned(s)) {
    m.failBuild(spec.id, s.failed ? s.failStatus : StepStatus::kDepFailed,
                s.drvPath);
  }
  s.parents = combine(s.parents, m.buildAttrs(b));
  m.schedule(top, false);
  m.propagate();
}

bool SchedulerCore::hasBuild(BuildId build) const {
  return impl_->builds.contains(build);
}

void SchedulerCore::cancelBuild(BuildId id) {
  Impl& m = *impl_;
  auto it = m.findBuild(id, "cancel");
  m.advance();
  uint32_t top = it->second.top;
  if (!it->second.failed)
    m.events.push_back(BuildEvent{id, BuildEvent::Kind::kCancelled,
                                  StepStatus::kCancelled,
                                  m.steps[top].drvPath});
  m.builds.erase(it);
  auto& tops = m.steps[top].topOf;
  tops.erase(std::find(tops.begin(), tops.end(), id));
  m.releaseParent(top);
  m.propagate();
}

void SchedulerCore::bumpBuild(BuildId id, int globalPriority) {
  Impl& m = *impl_;
  auto it = m.findBuild(id, "bump");
  m.advance();
  it->second.global = globalPriority;
  m.schedule(it->second.top, true);
  m.propagate();
}

void SchedulerCore::setHistoricalDuration(const std::string& pname,
                                          double seconds) {
  if (!(seconds > 0))
    throw SchedulerError("scheduler: historical duration of '" + pname +
                         "' must be > 0");
  impl_->history[pname] = seconds;
}

void SchedulerCore::setJobsetShares(JobsetId jobset, unsigned shares) {
  if (shares == 0)
    throw SchedulerError("scheduler: jobset " + std::to_string(jobset) +
                         " needs at least one scheduling share");
  impl_->advance();
  impl_->usage.setShares(jobset, shares);
  impl_->syncFairness(jobset);
}

double SchedulerCore::jobsetFairness(JobsetId jobset) const {
  return impl_->usage.fairness(jobset);
}

std::vector<BuildEvent> SchedulerCore::takeBuildEvents() {
  return std::exchange(impl_->events, {});
}

std::vector<StepAbort> SchedulerCore::takeAborts() {
  return std::exchange(impl_->aborts, {});
}

std::vector<StepId> SchedulerCore::takeDropped() {
  return std::exchange(impl_->dropped, {});
}

std::vector<Duration> SchedulerCore::takeIdleStretches() {
  return std::exchange(impl_->idleStretches, {});
}

}  // namespace kiln::scheduler
